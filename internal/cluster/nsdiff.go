package cluster

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/secrets"
)

// NamespaceDiff is how the objects of two namespaces differ.
type NamespaceDiff struct {
	A string `json:"a"`
	B string `json:"b"`
	// OnlyInA and OnlyInB are the objects one namespace has and the other
	// has not.
	OnlyInA []Ref `json:"onlyInA"`
	OnlyInB []Ref `json:"onlyInB"`
	// Different are the objects both have, with a unified diff from A to
	// B (status and server-set metadata left out).
	Different []Change `json:"different"`
	// Same counts the objects both have alike.
	Same int `json:"same"`
}

// Differ reports whether the namespaces differ at all.
func (d *NamespaceDiff) Differ() bool {
	return len(d.OnlyInA)+len(d.OnlyInB)+len(d.Different) > 0
}

// skippedResources are the namespaced kinds that say nothing of what was
// deployed: records of what happened, and objects controllers derive.
var skippedResources = map[schema.GroupResource]bool{
	{Resource: "events"}:                                    true,
	{Group: "events.k8s.io", Resource: "events"}:            true,
	{Resource: "endpoints"}:                                 true,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}: true,
	{Group: "apps", Resource: "controllerrevisions"}:        true,
	{Group: "coordination.k8s.io", Resource: "leases"}:      true,
}

// DiffNamespaces compares every object of namespace a with its namespace
// b namesake, across all kinds the cluster lists, the way a reviewer
// would: objects a controller derived from another (those with a
// controller owner), the ones Kubernetes creates in every namespace, and
// status and server-set metadata are left out.
func (c *Client) DiffNamespaces(ctx context.Context, a, b string) (*NamespaceDiff, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("listing the cluster's kinds: %w", reachable(c.config, err))
	}
	var kinds []schema.GroupVersionKind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || skippedResources[gv.WithResource(r.Name).GroupResource()] {
				continue
			}
			kinds = append(kinds, gv.WithKind(r.Kind))
		}
	}
	objs := map[string]map[string]*unstructured.Unstructured{a: {}, b: {}}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, gvk := range kinds {
		for _, ns := range []string{a, b} {
			g.Go(func() error {
				l := &unstructured.UnstructuredList{}
				l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := c.client.List(gctx, l, client.InNamespace(ns)); err != nil {
					if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
						return nil
					}
					return fmt.Errorf("listing %s in %s: %w", gvk.Kind, ns, reachable(c.config, err))
				}
				mu.Lock()
				defer mu.Unlock()
				for i := range l.Items {
					u := &l.Items[i]
					if derived(u) {
						continue
					}
					gvk := u.GroupVersionKind()
					objs[ns][gvk.Group+"/"+gvk.Kind+"/"+u.GetName()] = u
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d := &NamespaceDiff{A: a, B: b}
	keys := map[string]bool{}
	for k := range objs[a] {
		keys[k] = true
	}
	for k := range objs[b] {
		keys[k] = true
	}
	for k := range keys {
		ua, ub := objs[a][k], objs[b][k]
		switch {
		case ub == nil:
			d.OnlyInA = append(d.OnlyInA, RefOf(ua))
		case ua == nil:
			d.OnlyInB = append(d.OnlyInB, RefOf(ub))
		default:
			normalize(ua)
			normalize(ub)
			if reflect.DeepEqual(ua.Object, ub.Object) {
				d.Same++
				continue
			}
			ref := RefOf(ua)
			ref.Namespace = ""
			d.Different = append(d.Different, Change{Ref: ref, Action: Configured, Diff: unifiedNamed(ua, ub, a+"/"+ref.String(), b+"/"+ref.String())})
		}
	}
	byName := func(rs []Ref) {
		sort.Slice(rs, func(i, j int) bool { return rs[i].String() < rs[j].String() })
	}
	byName(d.OnlyInA)
	byName(d.OnlyInB)
	SortChanges(d.Different)
	return d, nil
}

// derived reports whether an object is one a controller or Kubernetes
// itself made, rather than one that was deployed.
func derived(u *unstructured.Unstructured) bool {
	for _, o := range u.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller {
			return true
		}
	}
	switch {
	case u.GetKind() == "ConfigMap" && u.GetName() == "kube-root-ca.crt":
		return true
	case u.GetKind() == "ServiceAccount" && u.GetName() == "default":
		return true
	case secrets.Is(u.GetAPIVersion(), u.GetKind()):
		t, _, _ := unstructured.NestedString(u.Object, "type")
		return t == "kubernetes.io/service-account-token"
	}
	return false
}

// normalize leaves what a deployer wrote: no status, no server-set or
// namespace-specific metadata, no addresses the cluster allocated; Secret
// values masked.
func normalize(u *unstructured.Unstructured) {
	clean(u)
	maskSecret(u)
	unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
	unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
	if a := u.GetAnnotations(); a != nil {
		for k := range a {
			if strings.HasPrefix(k, "sluice.dev/") || k == "deployment.kubernetes.io/revision" {
				delete(a, k)
			}
		}
		u.SetAnnotations(a)
		if len(a) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		}
	}
	if l := u.GetLabels(); l != nil {
		delete(l, labelPartOf)
		u.SetLabels(l)
		if len(l) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		}
	}
	if u.GetKind() == "Service" && u.GroupVersionKind().Group == "" {
		for _, f := range []string{"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"} {
			unstructured.RemoveNestedField(u.Object, "spec", f)
		}
	}
}
