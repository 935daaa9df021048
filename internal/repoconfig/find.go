// Package repoconfig reconciles RepoConfigs: the Sluice resources found in
// a repository by globs and label selectors, transformed by overrides,
// then reconciled in order: Images first (building what is missing), then
// ManifestSyncs (hydrating with the fresh digests).
package repoconfig

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/source"
)

// Loaded is the resources to reconcile, overrides applied.
type Loaded struct {
	Set *config.Set
	// Overrides are every override in effect (the caller's, then each
	// RepoConfig's): they also apply to remote kustomize bases.
	Overrides override.Set
	// Sources says what each RepoConfig read ("NAME: REPO@COMMIT").
	Sources []string
}

// Load reads the Sluice resources in paths. Each RepoConfig found is
// expanded into the resources its repository holds (read through the
// caller's overrides: a --local working tree stands in for it); the
// caller's overrides, then the RepoConfig's own, transform them. The
// caller's overrides transform the other resources found in paths.
func Load(ctx context.Context, cache *source.Cache, paths []string, extra override.Set) (*Loaded, error) {
	set, err := config.Load(paths...)
	if err != nil {
		return nil, err
	}
	// The person's own files and flags name the repositories their
	// credentials are for; what a RepoConfig finds in a repository does
	// not add to them.
	cache.Trust(set.Repos()...)
	for _, r := range extra.Repos {
		cache.Trust(r.From, r.To)
	}
	out, err := LoadSet(ctx, cache, set, extra, nil)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LoadSet is Load of resources already read: each RepoConfig of set is
// expanded into the resources its repository holds, read with the
// credentials creds gives it (nil: the Cache's); the other resources are
// transformed by the caller's overrides.
func LoadSet(ctx context.Context, cache *source.Cache, set *config.Set, extra override.Set, creds func(config.RepoConfig) *source.Credentials) (*Loaded, error) {
	out := &Loaded{Set: &config.Set{}, Overrides: extra}
	direct := &config.Set{ManifestSyncs: set.ManifestSyncs, Images: set.Images}
	// Each of the caller's overrides must apply to something: a
	// RepoConfig's repository, or any resource. A RepoConfig's own must
	// apply to what it found.
	var refs []override.Ref
	for _, rc := range set.RepoConfigs {
		refs = append(refs, override.Ref{Repo: rc.Spec.Repo, Ref: rc.Spec.Ref, BaseDir: rc.Origin.Dir})
	}
	extraUsed := [][]bool{extra.Used(refs...)}
	var errs []error
	for _, rc := range set.RepoConfigs {
		var rcCreds *source.Credentials
		if creds != nil {
			rcCreds = creds(rc)
		}
		found, src, err := find(ctx, cache, rc, extra, rcCreds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		where := fmt.Sprintf("%s:%d: RepoConfig %s: spec.overrides", rc.Origin.File, rc.Origin.LineOf("spec.overrides"), rc.Name)
		own := override.FromSpec(rc.Spec.Overrides, rc.Origin.Dir, where)
		used, err := extra.Plus(own).Apply(found)
		if err != nil {
			errs = append(errs, err)
		}
		extraUsed = append(extraUsed, used[:len(extra.Repos)])
		if err := own.Unused(used[len(extra.Repos):]); err != nil {
			errs = append(errs, err)
		}
		out.Set.ManifestSyncs = append(out.Set.ManifestSyncs, found.ManifestSyncs...)
		out.Set.Images = append(out.Set.Images, found.Images...)
		out.Overrides = out.Overrides.Plus(own)
		out.Sources = append(out.Sources, fmt.Sprintf("%s: %s", rc.Name, src.Describe()))
	}
	used, err := extra.Apply(direct)
	if err != nil {
		errs = append(errs, err)
	}
	if err := extra.Unused(append(extraUsed, used)...); err != nil {
		errs = append(errs, err)
	}
	out.Set.ManifestSyncs = append(direct.ManifestSyncs, out.Set.ManifestSyncs...)
	out.Set.Images = append(direct.Images, out.Set.Images...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := out.Set.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// maxGlobEntries bounds the files and folders a RepoConfig's globs walk:
// a repository of millions of files, or of symbolic links that multiply
// them, is refused rather than walked for ever.
const maxGlobEntries = 1_000_000

// find reads a RepoConfig's repository and returns the resources its globs
// and selectors take, untransformed.
func find(ctx context.Context, cache *source.Cache, rc config.RepoConfig, extra override.Set, creds *source.Credentials) (*config.Set, *source.Opened, error) {
	fail := func(field string, err error) error {
		return &config.Error{File: rc.Origin.File, Line: rc.Origin.LineOf(field), Kind: rc.Kind, Name: rc.Name, Field: field, Msg: err.Error()}
	}
	repo, ref, _, err := extra.Repo(rc.Spec.Repo, rc.Spec.Ref, rc.Origin.Dir)
	if err != nil {
		return nil, nil, fail("spec.repo", err)
	}
	src, err := cache.OpenSourceWith(ctx, repo, ref, rc.Origin.Dir, creds)
	if err != nil {
		return nil, nil, fail("spec.repo", err)
	}
	selectors := make([]labels.Selector, len(rc.Spec.Selectors))
	for i := range rc.Spec.Selectors {
		if selectors[i], err = metav1.LabelSelectorAsSelector(&rc.Spec.Selectors[i]); err != nil {
			return nil, nil, fail(fmt.Sprintf("spec.selectors[%d]", i), err)
		}
	}
	files := map[string]bool{}
	var errs []error
	for i, g := range rc.Spec.Globs {
		matches, err := source.Glob(ctx, src.FS, g, source.WalkOptions{Entries: maxGlobEntries})
		if err != nil {
			errs = append(errs, fail(fmt.Sprintf("spec.globs[%d]", i), err))
			continue
		}
		if len(matches) == 0 {
			errs = append(errs, fail(fmt.Sprintf("spec.globs[%d]", i), fmt.Errorf("%q matches no file in %s", g, src.Describe())))
		}
		for _, m := range matches {
			files[m] = true
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	set := &config.Set{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if info, err := src.FS.Stat(name); err == nil && info.Size() > config.MaxFile {
			errs = append(errs, fmt.Errorf("%s: larger than %d MiB: not a file of Sluice resources (narrow spec.globs)", displayName(src, name), config.MaxFile>>20))
			continue
		}
		data, err := src.FS.ReadFile(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		part, err := config.Parse(displayName(src, name), data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, ms := range part.ManifestSyncs {
			if selected(selectors, ms.Labels) {
				if err := foundSync(src, rc, &ms); err != nil {
					errs = append(errs, err)
					continue
				}
				set.ManifestSyncs = append(set.ManifestSyncs, ms)
			}
		}
		for _, img := range part.Images {
			if selected(selectors, img.Labels) {
				if err := foundImage(src, rc, &img); err != nil {
					errs = append(errs, err)
					continue
				}
				set.Images = append(set.Images, img)
			}
		}
	}
	return set, src, errors.Join(errs...)
}

func selected(selectors []labels.Selector, l map[string]string) bool {
	if len(selectors) == 0 {
		return true
	}
	for _, s := range selectors {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// displayName is how a found file is named in errors: its path on disk
// for a working tree, REPO@COMMIT:PATH for a commit's.
func displayName(src *source.Opened, name string) string {
	if src.Working() {
		return filepath.Join(src.Location.Path, filepath.FromSlash(name))
	}
	return src.Describe() + ":" + name
}

// foundSync settles what a ManifestSync found in src may name. Its
// source and destination are its own repository (a relative path: that
// repository, at the commit read) or remote ones; a destination it leaves
// out is its own repository, not the directory Sluice runs in. It names
// no Secret (its RepoConfig lends them, by URL), and sets no pull request
// template unless its RepoConfig allows it.
func foundSync(src *source.Opened, rc config.RepoConfig, ms *config.ManifestSync) error {
	mark(src, rc, &ms.Origin)
	fail := func(field string, err error) error {
		return &config.Error{File: ms.Origin.File, Line: ms.Origin.LineOf(field), Kind: ms.Kind, Name: ms.Name, Field: field, Msg: err.Error()}
	}
	spec := ms.Spec
	for _, named := range []struct {
		field string
		ref   *v1alpha1.SecretRef
	}{{"spec.source.secretRef", spec.Source.SecretRef}, {"spec.destination.secretRef", spec.Destination.SecretRef}, {"spec.registrySecretRef", spec.RegistrySecretRef}, {"spec.destination.signing.secretRef", signingRef(spec.Destination.Signing)}} {
		if named.ref != nil {
			return fail(named.field, ownSecret(rc))
		}
	}
	if pr := spec.Destination.PullRequest; pr != nil && (pr.Title != "" || pr.Body != "") && !rc.Spec.AllowPullRequestTemplates {
		field := "spec.destination.pullRequest.title"
		if pr.Title == "" {
			field = "spec.destination.pullRequest.body"
		}
		return fail(field, fmt.Errorf("a ManifestSync found by RepoConfig %s sets no pull request template unless the RepoConfig says allowPullRequestTemplates: true", rc.Name))
	}
	if err := ownRepo(src, &ms.Origin, &ms.Spec.Source.Repo, &ms.Spec.Source.Ref); err != nil {
		return fail("spec.source.repo", err)
	}
	if !ms.Origin.Has("spec.destination.repo") {
		ms.Spec.Destination.Repo = self(src)
		return nil
	}
	var noRef string
	if err := ownRepo(src, &ms.Origin, &ms.Spec.Destination.Repo, &noRef); err != nil {
		return fail("spec.destination.repo", err)
	}
	return nil
}

// foundImage settles what an Image found in src may name, as foundSync.
func foundImage(src *source.Opened, rc config.RepoConfig, img *config.Image) error {
	mark(src, rc, &img.Origin)
	fail := func(field string, err error) error {
		return &config.Error{File: img.Origin.File, Line: img.Origin.LineOf(field), Kind: img.Kind, Name: img.Name, Field: field, Msg: err.Error()}
	}
	if img.Spec.RegistrySecretRef != nil {
		return fail("spec.registrySecretRef", ownSecret(rc))
	}
	for j, s := range img.Spec.Source {
		if s.SecretRef != nil {
			return fail(fmt.Sprintf("spec.source[%d].secretRef", j), ownSecret(rc))
		}
	}
	for j := range img.Spec.Source {
		if err := ownRepo(src, &img.Origin, &img.Spec.Source[j].Repo, &img.Spec.Source[j].Ref); err != nil {
			field := fmt.Sprintf("spec.source[%d].repo", j)
			return &config.Error{File: img.Origin.File, Line: img.Origin.LineOf(field), Kind: img.Kind, Name: img.Name, Field: field, Msg: err.Error()}
		}
	}
	return nil
}

// ownSecret is why a found resource may not name a Secret.
func ownSecret(rc config.RepoConfig) error {
	return fmt.Errorf("a resource found by RepoConfig %s names no Secret: the RepoConfig lends its namespace's Secrets by URL (spec.credentials), and whoever writes to the repository does not choose them", rc.Name)
}

// mark records where a resource was found, and whether its RepoConfig
// lets it run a builder.
func mark(src *source.Opened, rc config.RepoConfig, o *config.Origin) {
	o.Repo = src.Describe()
	o.AllowBuilders = rc.Spec.AllowBuilders
}

// self is how a found resource names its own repository.
func self(src *source.Opened) string {
	if src.Location.IsLocal() {
		return src.Location.Path
	}
	return src.Location.URL
}

// ownRepo resolves a repository a found resource names. In a working tree
// on disk, paths are relative to the file, as in the person's own files.
// In a commit's tree there is no directory for them to be relative to: a
// relative path names the resource's own repository at the commit read.
// A repository read from a remote may not name this machine's disk (an
// absolute path, a file:// URL): that would let whoever writes to it
// render, say, ~/.kube into a destination.
func ownRepo(src *source.Opened, o *config.Origin, repo, ref *string) error {
	if src.Working() {
		return nil
	}
	o.Dir = ""
	loc, err := source.ParseLocation(*repo, "/")
	if err != nil || !loc.IsLocal() {
		return nil // a remote URL, or an error validation reports
	}
	if filepath.IsAbs(*repo) || strings.HasPrefix(*repo, "file:") {
		if !src.Location.IsLocal() {
			return fmt.Errorf("%q is on this machine's disk: a resource found in %s may name its own repository (a relative path) or remote ones only", *repo, src.Location)
		}
		return nil
	}
	*repo = self(src)
	if *ref == "" {
		*ref = src.Commit
	}
	return nil
}

func signingRef(s *v1alpha1.Signing) *v1alpha1.SecretRef {
	if s == nil {
		return nil
	}
	return s.SecretRef
}
