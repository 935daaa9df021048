package registry

import (
	"errors"
	"sort"

	"github.com/Masterminds/semver/v3"
)

// Highest returns the highest version among tags that satisfies the
// constraint.
func Highest(tags []string, constraint string) (string, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", err
	}
	var vs []*semver.Version
	orig := map[*semver.Version]string{}
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		vs = append(vs, v)
		orig[v] = t
	}
	if len(vs) == 0 {
		return "", errors.New("no version matches " + constraint)
	}
	sort.Sort(semver.Collection(vs))
	return orig[vs[len(vs)-1]], nil
}
