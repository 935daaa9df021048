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

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/pin"
	"sluice.dev/sluice/internal/source"
)

// Overrides are overrides with the directory their relative paths are
// relative to, and where they were declared, for errors.
type Overrides struct {
	v1alpha1.Overrides
	// Dir is the base of relative local paths in From and To.
	Dir string
	// Where names the declaration in errors ("run.yaml:12: RepoConfig dev:
	// spec.overrides", "--local").
	Where string
}

// Repo maps one git reference through the repository overrides: the first
// whose From is the same repository (and, when From names a ref, the same
// ref) gives the reference its To. A To with "?ref=" sets the ref; a local
// path is read as a working tree (no ref); a URL without a ref keeps the
// reference's. index is the override applied, -1 for none.
func (o Overrides) Repo(repo, ref, baseDir string) (newRepo, newRef string, index int, err error) {
	loc, err := source.ParseLocation(repo, baseDir)
	if err != nil {
		return repo, ref, -1, err
	}
	if loc.Ref != "" {
		ref = loc.Ref
	}
	for i, r := range o.Repos {
		from, err := source.ParseLocation(r.From, o.Dir)
		if err != nil {
			return repo, ref, -1, fmt.Errorf("%s.repos[%d].from: %w", o.Where, i, err)
		}
		if from.Repository() != loc.Repository() || from.Ref != "" && from.Ref != ref {
			continue
		}
		to, err := source.ParseLocation(r.To, o.Dir)
		if err != nil {
			return repo, ref, -1, fmt.Errorf("%s.repos[%d].to: %w", o.Where, i, err)
		}
		switch {
		case to.IsLocal() && to.Ref == "":
			return to.Path, "", i, nil
		case to.IsLocal():
			return to.Path, to.Ref, i, nil
		case to.Ref != "":
			return to.URL, to.Ref, i, nil
		default:
			return to.URL, ref, i, nil
		}
	}
	return repo, ref, -1, nil
}

// Apply transforms every resource of the set: sources through the
// repository overrides, images through the image overrides (Images push
// the deployment tag; ManifestSyncs pin to it where it exists, and as
// before where it does not). An override of a repository no resource
// names is an error: it would silently do nothing.
func (o Overrides) Apply(set *config.Set) error {
	used := make([]bool, len(o.Repos))
	var errs []error
	mapRepo := func(where string, repo, ref *string, baseDir string) {
		r, f, i, err := o.Repo(*repo, *ref, baseDir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			return
		}
		if i >= 0 {
			used[i] = true
			*repo, *ref = r, f
		}
	}
	for i := range set.ManifestSyncs {
		ms := &set.ManifestSyncs[i]
		src := &ms.Spec.Source
		mapRepo(fmt.Sprintf("%s:%d: ManifestSync %s: spec.source", ms.Origin.File, ms.Origin.LineOf("spec.source.repo"), ms.Name), &src.Repo, &src.Ref, ms.Origin.Dir)
		if len(o.Images) > 0 {
			rules := make([]v1alpha1.ImageRule, 0, len(o.Images)+len(ms.Spec.Images))
			for _, img := range o.Images {
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
		for _, ov := range o.Images {
			if pin.MatchName(ov.Name, img.Spec.Image) && !contains(img.Spec.Tags, ov.Tag) {
				img.Spec.Tags = append(img.Spec.Tags, ov.Tag)
			}
		}
	}
	for i, u := range used {
		if !u {
			errs = append(errs, fmt.Errorf("%s.repos[%d].from: %s is the repository of no resource found", o.Where, i, o.Repos[i].From))
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
// repository whose working tree PATH is in (its remote's URL).
func Local(spec, dir string) (v1alpha1.RepoOverride, error) {
	if repo, path, ok := cutLast(spec, "="); ok {
		return v1alpha1.RepoOverride{From: repo, To: abs(path, dir)}, nil
	}
	head, err := source.LocalHead(abs(spec, dir))
	if err != nil {
		return v1alpha1.RepoOverride{}, fmt.Errorf("%s is not in a git working tree: give REPO=PATH", spec)
	}
	if head.Remote == "" {
		return v1alpha1.RepoOverride{}, fmt.Errorf("the working tree %s has no remote to stand in for: give REPO=PATH", head.Root)
	}
	return v1alpha1.RepoOverride{From: head.Remote, To: head.Root}, nil
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

func abs(p, dir string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
