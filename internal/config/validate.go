package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"sluice.dev/sluice/internal/source"
)

// Validate checks what no single resource can: names are unique per kind,
// repositories parse, no two syncs claim the same destination folder or
// one inside another's, and no two Images push the same repository.
func (s *Set) Validate() error {
	errs := s.validateImages()
	byName := map[string]ManifestSync{}
	type claim struct {
		key  string // repo key + branch
		path string
		ms   ManifestSync
	}
	var claims []claim
	for _, ms := range s.ManifestSyncs {
		fail := func(field, msg string) {
			errs = append(errs, &Error{File: ms.Origin.File, Line: ms.Origin.LineOf(field), Kind: ms.Kind, Name: ms.Name, Field: field, Msg: msg})
		}
		if prev, ok := byName[ms.Name]; ok {
			fail("metadata.name", fmt.Sprintf("duplicate name: also declared at %s:%d", prev.Origin.File, prev.Origin.Line))
			continue
		}
		byName[ms.Name] = ms
		if _, err := source.ParseLocation(ms.Spec.Source.Repo, ms.Origin.Dir); err != nil {
			fail("spec.source.repo", err.Error())
		}
		if d := ms.Spec.Destination; d.IsOCI() {
			claims = append(claims, claim{key: d.Repo + "#" + d.Tag, path: d.Path, ms: ms})
			continue
		}
		dst, err := source.ParseLocation(ms.Spec.Destination.Repo, ms.Origin.Dir)
		if err != nil {
			fail("spec.destination.repo", err.Error())
			continue
		}
		claims = append(claims, claim{key: dst.Key() + "#" + ms.Spec.Destination.Branch, path: ms.Spec.Destination.Path, ms: ms})
	}
	// Sorting by key then path puts every folder right before the folders
	// inside it, so overlaps are found between neighbours' prefixes.
	sort.SliceStable(claims, func(i, j int) bool {
		if claims[i].key != claims[j].key {
			return claims[i].key < claims[j].key
		}
		return claims[i].path < claims[j].path
	})
	for i := range claims {
		for j := i + 1; j < len(claims) && claims[j].key == claims[i].key; j++ {
			a, b := claims[i], claims[j]
			inside := strings.HasPrefix(b.path, a.path+"/")
			if a.path != b.path && !inside {
				if !strings.HasPrefix(b.path, a.path) {
					break
				}
				continue // "apps/a" and "apps/ab": siblings
			}
			what := "is the same folder as"
			if inside {
				what = fmt.Sprintf("is inside %q, the folder of", a.path)
			}
			errs = append(errs, &Error{
				File: b.ms.Origin.File, Line: b.ms.Origin.LineOf("spec.destination.path"),
				Kind: b.ms.Kind, Name: b.ms.Name, Field: "spec.destination.path",
				Msg: fmt.Sprintf("%q %s ManifestSync %s (%s:%d) in the same repository and branch %q",
					b.path, what, a.ms.Name, a.ms.Origin.File, a.ms.Origin.LineOf("spec.destination.path"), b.ms.Spec.Destination.Target()),
			})
		}
	}
	return errors.Join(errs...)
}

func (s *Set) validateImages() []error {
	var errs []error
	byName := map[string]Image{}
	byRepo := map[string]Image{}
	for _, img := range s.Images {
		fail := func(field, msg string) {
			errs = append(errs, &Error{File: img.Origin.File, Line: img.Origin.LineOf(field), Kind: img.Kind, Name: img.Name, Field: field, Msg: msg})
		}
		if prev, ok := byName[img.Name]; ok {
			fail("metadata.name", fmt.Sprintf("duplicate name: also declared at %s:%d", prev.Origin.File, prev.Origin.Line))
			continue
		}
		byName[img.Name] = img
		if prev, ok := byRepo[img.Spec.Image]; ok {
			fail("spec.image", fmt.Sprintf("Image %s (%s:%d) pushes %s too", prev.Name, prev.Origin.File, prev.Origin.Line, img.Spec.Image))
		}
		byRepo[img.Spec.Image] = img
		for i, src := range img.Spec.Source {
			if _, err := source.ParseLocation(src.Repo, img.Origin.Dir); err != nil {
				fail(fmt.Sprintf("spec.source[%d].repo", i), err.Error())
			}
		}
	}
	return errs
}

// Repos lists every repository the resources name (sources, destinations,
// images' sources, RepoConfigs' repositories), as written: the
// repositories a run's credentials are for, when the resources are the
// person's own.
func (s *Set) Repos() []string {
	var out []string
	for _, ms := range s.ManifestSyncs {
		out = append(out, ms.Spec.Source.Repo)
		if !ms.Spec.Destination.IsOCI() { // a registry: its credentials are a docker config's
			out = append(out, ms.Spec.Destination.Repo)
		}
	}
	for _, img := range s.Images {
		for _, src := range img.Spec.Source {
			out = append(out, src.Repo)
		}
	}
	for _, rc := range s.RepoConfigs {
		out = append(out, rc.Spec.Repo)
	}
	return out
}

// Named returns the ManifestSyncs of the given names (all when names is
// empty), in the order they were read; an error names those missing, or
// says there are none.
func (s *Set) Named(names []string) ([]ManifestSync, error) {
	if len(names) == 0 {
		if len(s.ManifestSyncs) == 0 {
			return nil, errors.New("no ManifestSync found")
		}
		return s.ManifestSyncs, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []ManifestSync
	for _, ms := range s.ManifestSyncs {
		if want[ms.Name] {
			out = append(out, ms)
			delete(want, ms.Name)
		}
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for n := range want {
			missing = append(missing, n)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("no ManifestSync named %s", strings.Join(missing, ", "))
	}
	return out, nil
}
