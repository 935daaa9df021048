package controller

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// Field indexes of the controller's cache: what a webhook looks its
// resources up by.
const (
	// indexRepo is the repositories a resource reads, by
	// source.Location.Repository (host and path: https and ssh alike).
	indexRepo = ".sluice.repo"
	// indexImage is the images a ManifestSync follows: "host/repo:tag" for
	// each pinned image, and "host/repo" where a rule picks among tags
	// (semver, sourceCommit, optional rules), so that any new tag counts.
	indexImage = ".sluice.image"
)

func repository(raw string) string {
	loc, err := source.ParseLocation(raw, "/")
	if err != nil || loc.IsLocal() {
		return ""
	}
	return loc.Repository()
}

// imageKey normalises "repo:tag" (or "repo") as an index key: Docker Hub's
// short names spelled out, as a registry's notification names them.
func imageKey(repo, tag string) string {
	r, err := name.NewRepository(repo, name.WeakValidation)
	if err != nil {
		return ""
	}
	key := r.RegistryStr() + "/" + r.RepositoryStr()
	if tag != "" {
		key += ":" + tag
	}
	return key
}

func addIndexes(ctx context.Context, mgr manager.Manager) error {
	fi := mgr.GetFieldIndexer()
	if err := fi.IndexField(ctx, &v1alpha1.ManifestSync{}, indexRepo, func(o client.Object) []string {
		ms := o.(*v1alpha1.ManifestSync)
		return nonEmpty(repository(ms.Spec.Source.Repo))
	}); err != nil {
		return err
	}
	if err := fi.IndexField(ctx, &v1alpha1.ManifestSync{}, indexImage, func(o client.Object) []string {
		ms := o.(*v1alpha1.ManifestSync)
		anyTag := false
		for _, r := range ms.Spec.Images {
			anyTag = anyTag || r.Optional || r.Strategy == v1alpha1.StrategySemver || r.Strategy == v1alpha1.StrategySourceCommit
		}
		var keys []string
		for _, img := range ms.Status.Images {
			keys = append(keys, imageKey(img.Name, img.Tag))
			if anyTag {
				keys = append(keys, imageKey(img.Name, ""))
			}
		}
		return nonEmpty(keys...)
	}); err != nil {
		return err
	}
	if err := fi.IndexField(ctx, &v1alpha1.Image{}, indexRepo, func(o client.Object) []string {
		img := o.(*v1alpha1.Image)
		var keys []string
		for _, s := range img.Spec.Source {
			keys = append(keys, repository(s.Repo))
		}
		return nonEmpty(keys...)
	}); err != nil {
		return err
	}
	return fi.IndexField(ctx, &v1alpha1.RepoConfig{}, indexRepo, func(o client.Object) []string {
		return nonEmpty(repository(o.(*v1alpha1.RepoConfig).Spec.Repo))
	})
}

func nonEmpty(vs ...string) []string {
	out := vs[:0:0]
	seen := map[string]bool{}
	for _, v := range vs {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
