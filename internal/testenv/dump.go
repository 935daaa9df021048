package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Dump returns every object of the namespaces, and the cluster-scoped
// objects named (as "Kind/name"), keyed "group/Kind/namespace/name", as
// they compare across a change that should leave them as they were: no
// resourceVersion, managedFields, generation or timestamps. Objects being
// deleted count as gone: this control plane runs no namespace controller
// to finish their deletion. Annotations named in ignore are left out too.
func Dump(cfg *rest.Config, namespaces []string, clusterScoped []string, ignore ...string) (map[string]map[string]any, error) {
	ctx := context.Background()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	var mu sync.Mutex
	out := map[string]map[string]any{}
	add := func(u *unstructured.Unstructured) {
		if u.GetDeletionTimestamp() != nil {
			return
		}
		obj := u.DeepCopy().Object
		for _, f := range []string{"resourceVersion", "managedFields", "generation", "creationTimestamp"} {
			unstructured.RemoveNestedField(obj, "metadata", f)
		}
		if a, ok, _ := unstructured.NestedStringMap(obj, "metadata", "annotations"); ok {
			for _, k := range ignore {
				delete(a, k)
			}
			if len(a) == 0 {
				unstructured.RemoveNestedField(obj, "metadata", "annotations")
			} else {
				unstructured.SetNestedStringMap(obj, a, "metadata", "annotations")
			}
		}
		gvk := u.GroupVersionKind()
		mu.Lock()
		out[fmt.Sprintf("%s/%s/%s/%s", gvk.Group, gvk.Kind, u.GetNamespace(), u.GetName())] = obj
		mu.Unlock()
	}
	// The first list of a custom resource on a fresh API server waits about
	// a second for its storage: list in parallel.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || r.Name == "events" {
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name))
			if r.Namespaced {
				for _, ns := range namespaces {
					g.Go(func() error {
						items, err := res.Namespace(ns).List(gctx, metav1.ListOptions{})
						if err != nil {
							return fmt.Errorf("listing %s in %s: %w", r.Name, ns, err)
						}
						for i := range items.Items {
							add(&items.Items[i])
						}
						return nil
					})
				}
				continue
			}
			for _, name := range clusterScoped {
				if kind, n, _ := strings.Cut(name, "/"); kind == r.Kind {
					g.Go(func() error {
						if u, err := res.Get(gctx, n, metav1.GetOptions{}); err == nil {
							add(u)
						}
						return nil
					})
				}
			}
		}
	}
	return out, g.Wait()
}
