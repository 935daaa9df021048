package controller

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/source"
)

// ApplyResources creates (or updates) the resources of some files in a
// namespace of a cluster, for a controller to reconcile; their local
// repository paths, relative to their files, become absolute (a
// controller started with AllowLocalRepos reads them: a person trying the
// controller on their own machine). It returns the names applied.
func ApplyResources(ctx context.Context, cfg *rest.Config, namespace string, set *config.Set) ([]string, error) {
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	abs := func(repo, dir string) string {
		loc, err := source.ParseLocation(repo, dir)
		if err != nil || !loc.IsLocal() {
			return repo
		}
		return loc.Path
	}
	var objs []client.Object
	for _, ms := range set.ManifestSyncs {
		o := ms.DeepCopy()
		o.Spec.Source.Repo = abs(o.Spec.Source.Repo, ms.Origin.Dir)
		o.Spec.Destination.Repo = abs(o.Spec.Destination.Repo, ms.Origin.Dir)
		objs = append(objs, o)
	}
	for _, img := range set.Images {
		o := img.DeepCopy()
		for i := range o.Spec.Source {
			o.Spec.Source[i].Repo = abs(o.Spec.Source[i].Repo, img.Origin.Dir)
		}
		objs = append(objs, o)
	}
	for _, rc := range set.RepoConfigs {
		o := rc.DeepCopy()
		o.Spec.Repo = abs(o.Spec.Repo, rc.Origin.Dir)
		objs = append(objs, o)
	}
	var names []string
	for _, o := range objs {
		o.SetNamespace(namespace)
		o.SetResourceVersion("")
		kind := o.GetObjectKind().GroupVersionKind().Kind
		cur := o.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(o), cur)
		if err == nil {
			o.SetResourceVersion(cur.GetResourceVersion())
			err = c.Update(ctx, o)
		} else {
			err = c.Create(ctx, o)
		}
		if err != nil {
			return names, fmt.Errorf("%s %s/%s: %w", kind, namespace, o.GetName(), err)
		}
		names = append(names, kind+"/"+o.GetName())
	}
	return names, nil
}
