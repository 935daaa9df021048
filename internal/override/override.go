// Package override transforms Sluice resources in memory before they are
// reconciled: repository overrides point every git reference they hold
// (ManifestSync and Image sources, remote kustomize bases) at a branch, a
// fork or a local working tree; image overrides give images a mutable
// deployment tag. A RepoConfig's overrides and a takeover's flags are the
// same mechanism.
package override

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/pin"
	"sluice.dev/sluice/internal/source"
)

// Repo is one repository override, with the directory its relative paths
// are relative to and where it was declared.
type Repo struct {
	v1alpha1.RepoOverride
	Dir string
	// Where names it in errors: "repoconfig.yaml:14: RepoConfig dev:
	// spec.overrides.repos[0]", "--local".
	Where string
}

// Set is overrides from one or more declarations; where several apply to
// one reference, the first wins.
type Set struct {
	Repos  []Repo
	Images []v1alpha1.ImageOverride
}

// FromSpec makes a Set of a resource's overrides.
func FromSpec(o v1alpha1.Overrides, dir, where string) Set {
	var s Set
	for i, r := range o.Repos {
		s.Repos = append(s.Repos, Repo{RepoOverride: r, Dir: dir, Where: fmt.Sprintf("%s.repos[%d]", where, i)})
	}
	s.Images = append(s.Images, o.Images...)
	return s
}

// Plus returns s's overrides followed by t's.
func (s Set) Plus(t Set) Set {
	return Set{Repos: append(append([]Repo(nil), s.Repos...), t.Repos...), Images: append(append([]v1alpha1.ImageOverride(nil), s.Images...), t.Images...)}
}

// Repo maps one git reference: the first override whose From is the same
// repository (and, when From names a ref, the same ref) gives it its To.
// A To with "?ref=" sets the ref; a local path is read as a working tree
// (no ref); a URL without a ref keeps the reference's. matched lists every
// override whose From matched, the winner first.
func (s Set) Repo(repo, ref, baseDir string) (newRepo, newRef string, matched []int, err error) {
	loc, err := source.ParseLocation(repo, baseDir)
	if err != nil {
		return repo, ref, nil, err
	}
	if loc.Ref != "" {
		ref = loc.Ref
	}
	newRepo, newRef = repo, ref
	for i, r := range s.Repos {
		from, err := source.ParseLocation(r.From, r.Dir)
		if err != nil {
			return repo, ref, nil, fmt.Errorf("%s.from: %w", r.Where, err)
		}
		if from.Repository() != loc.Repository() || from.Ref != "" && from.Ref != ref {
			continue
		}
		matched = append(matched, i)
		if len(matched) > 1 {
			continue
		}
		to, err := source.ParseLocation(r.To, r.Dir)
		if err != nil {
			return repo, ref, nil, fmt.Errorf("%s.to: %w", r.Where, err)
		}
		switch {
		case to.IsLocal():
			newRepo, newRef = to.Path, to.Ref // no ref: the working tree as it is
		case to.Ref != "":
			newRepo, newRef = to.URL, to.Ref
		default:
			newRepo = to.URL
		}
	}
	return newRepo, newRef, matched, nil
}

// Ref is a git reference, for Used.
type Ref struct {
	Repo, Ref, BaseDir string
}

// Used reports which repository overrides apply to any of the references.
func (s Set) Used(refs ...Ref) []bool {
	used := make([]bool, len(s.Repos))
	for _, r := range refs {
		if _, _, matched, err := s.Repo(r.Repo, r.Ref, r.BaseDir); err == nil {
			for _, i := range matched {
				used[i] = true
			}
		}
	}
	return used
}

// Apply transforms every resource of the set: sources through the
// repository overrides, images through the image overrides (Images push
// the deployment tag; ManifestSyncs pin to it where it exists, and as
// before where it does not). It reports which repository overrides
// applied to something.
func (s Set) Apply(set *config.Set) (used []bool, err error) {
	used = make([]bool, len(s.Repos))
	var errs []error
	mapRepo := func(where string, repo, ref *string, baseDir string) {
		r, f, matched, err := s.Repo(*repo, *ref, baseDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			return
		}
		for _, i := range matched {
			used[i] = true
		}
		*repo, *ref = r, f
	}
	for i := range set.ManifestSyncs {
		ms := &set.ManifestSyncs[i]
		src := &ms.Spec.Source
		mapRepo(fmt.Sprintf("%s:%d: ManifestSync %s: spec.source", ms.Origin.File, ms.Origin.LineOf("spec.source.repo"), ms.Name), &src.Repo, &src.Ref, ms.Origin.Dir)
		if len(s.Images) > 0 {
			rules := make([]v1alpha1.ImageRule, 0, len(s.Images)+len(ms.Spec.Images))
			for _, img := range s.Images {
				rules = append(rules, v1alpha1.ImageRule{Name: img.Name, Strategy: v1alpha1.StrategyMutableTag, Tag: img.Tag, Optional: true})
			}
			ms.Spec.Images = append(rules, ms.Spec.Images...)
		}
	}
	for i := range set.Images {
		img := &set.Images[i]
		for j := range img.Spec.Source {
			src := &img.Spec.Source[j]
			mapRepo(fmt.Sprintf("%s:%d: Image %s: spec.source[%d]", img.Origin.File, img.Origin.LineOf(fmt.Sprintf("spec.source[%d].repo", j)), img.Name, j), &src.Repo, &src.Ref, img.Origin.Dir)
		}
		for _, ov := range s.Images {
			if pin.MatchName(ov.Name, img.Spec.Image) && !contains(img.Spec.Tags, ov.Tag) {
				img.Spec.Tags = append(img.Spec.Tags, ov.Tag)
			}
		}
	}
	return used, errors.Join(errs...)
}

// Unused reports, as errors, the repository overrides none of the usage
// reports saw apply: an override of a repository no resource names would
// silently do nothing.
func (s Set) Unused(reports ...[]bool) error {
	var errs []error
	for i, r := range s.Repos {
		used := false
		for _, rep := range reports {
			used = used || i < len(rep) && rep[i]
		}
		if !used {
			errs = append(errs, fmt.Errorf("%s.from: %s is the repository of no resource found", r.Where, r.From))
		}
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Local is the override that reads a repository from a local working
// tree, uncommitted changes included: REPO=PATH, or PATH alone for the
// repository whose working tree PATH is in (its remote's URL). Relative
// paths are relative to dir.
func Local(spec, dir string) (Repo, error) {
	where := "--local " + spec
	if i := strings.LastIndex(spec, "="); i >= 0 {
		return Repo{RepoOverride: v1alpha1.RepoOverride{From: spec[:i], To: abs(spec[i+1:], dir)}, Dir: dir, Where: where}, nil
	}
	head, err := source.LocalHead(abs(spec, dir))
	if err != nil {
		return Repo{}, fmt.Errorf("%s: not in a git working tree: give REPO=PATH", where)
	}
	if head.Remote == "" {
		return Repo{}, fmt.Errorf("%s: the working tree %s has no remote to stand in for: give REPO=PATH", where, head.Root)
	}
	return Repo{RepoOverride: v1alpha1.RepoOverride{From: head.Remote, To: head.Root}, Dir: dir, Where: where}, nil
}

// Parse reads FROM=TO (--override-repo). Either side may carry a ref
// ("URL?ref=BRANCH"): the "=" that separates them is the first one that is
// not a query's.
func Parse(spec, dir string) (Repo, error) {
	i := -1
	for j := 0; j < len(spec); j++ {
		if spec[j] == '=' && !strings.HasSuffix(spec[:j], "?ref") && !strings.HasSuffix(spec[:j], "&ref") {
			i = j
			break
		}
	}
	if i <= 0 || i == len(spec)-1 {
		return Repo{}, fmt.Errorf("--override-repo %s: expected FROM=TO", spec)
	}
	return Repo{RepoOverride: v1alpha1.RepoOverride{From: spec[:i], To: spec[i+1:]}, Dir: dir, Where: "--override-repo " + spec}, nil
}

func abs(p, dir string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
