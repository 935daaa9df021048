package cluster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// plan is a set made ready to apply: each object mapped to its resource,
// its namespace set, its inventory label added.
type plan struct {
	inventory *Inventory
	objects   []Object
	// listed keeps the inventory members listed while checking the set,
	// by group kind and namespace, for the prune to reuse.
	listedMu sync.Mutex
	listed   map[string][]*unstructured.Unstructured
	origins  map[string]string // Ref.key → origin
	// defs are CRDs, Namespaces and ClusterRoles: applied, and waited on,
	// first.
	defs []*unstructured.Unstructured
	rest []*unstructured.Unstructured
	// newKinds are kinds the cluster does not know yet that a CRD of the
	// set defines.
	newKinds   map[schema.GroupKind]bool
	groupKinds map[schema.GroupKind]bool
	namespaces map[string]bool
}

// prepare checks and completes a set: every object must have a kind the
// cluster knows (or a CRD of the set defines) and a name; namespaced
// objects without a namespace get ns; cluster-scoped ones lose any. Every
// problem of every object is reported together.
func (c *Client) prepare(objs []Object, ns string, inv *Inventory) (*plan, error) {
	p := &plan{inventory: inv, listed: map[string][]*unstructured.Unstructured{}, origins: map[string]string{}, newKinds: map[schema.GroupKind]bool{}, groupKinds: map[schema.GroupKind]bool{}, namespaces: map[string]bool{}}
	crdScopes := map[schema.GroupKind]string{}
	for _, o := range objs {
		if utils.IsCRD(o.Unstructured) {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
			crdScopes[schema.GroupKind{Group: group, Kind: kind}] = scope
		}
	}
	var errs []error
	seen := map[string]string{}
	for _, in := range objs {
		o := Object{Unstructured: in.DeepCopy(), Origin: in.Origin}
		fail := func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			errs = append(errs, fmt.Errorf("%s (%s): %s", RefOf(o.Unstructured).Subject(), o.Origin, msg))
		}
		gvk := o.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			fail("apiVersion and kind are required")
			continue
		}
		if o.GetName() == "" && o.GetGenerateName() == "" {
			fail("metadata.name is required")
			continue
		}
		namespaced := false
		mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
			namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
		case meta.IsNoMatchError(err):
			scope, ok := crdScopes[gvk.GroupKind()]
			if !ok {
				fail("the cluster does not know kind %s in %s, and no CustomResourceDefinition in this set defines it", gvk.Kind, gvk.GroupVersion())
				continue
			}
			p.newKinds[gvk.GroupKind()] = true
			namespaced = scope != "Cluster"
		default:
			return nil, reachable(c.config, err)
		}
		if namespaced && o.GetNamespace() == "" {
			o.SetNamespace(ns)
		}
		if !namespaced {
			o.SetNamespace("")
		}
		ref := RefOf(o.Unstructured)
		if prev, dup := seen[ref.Key()]; dup {
			fail("defined twice: also in %s", prev)
			continue
		}
		seen[ref.Key()] = o.Origin
		p.origins[ref.Key()] = o.Origin
		p.groupKinds[gvk.GroupKind()] = true
		p.namespaces[o.GetNamespace()] = true
		if inv != nil {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[labelPartOf] = inv.ID()
			o.SetLabels(labels)
		}
		stamp(o.Unstructured)
		p.objects = append(p.objects, o)
		if utils.IsClusterDefinition(o.Unstructured) {
			p.defs = append(p.defs, o.Unstructured)
		} else {
			p.rest = append(p.rest, o.Unstructured)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Resolve checks a set as Apply would, without applying it, and returns
// its objects completed: namespaced objects without a namespace get ns (the
// client's when empty), cluster-scoped ones have none. A caller that must
// know exactly which objects an apply will touch (a live session saving
// their prior state) reads the refs from here.
func (c *Client) Resolve(objs []Object, ns string) ([]Object, error) {
	if ns == "" {
		ns = c.Namespace
	}
	p, err := c.prepare(objs, ns, nil)
	if err != nil {
		return nil, err
	}
	return p.objects, nil
}

func listKey(gk schema.GroupKind, ns string) string { return gk.String() + "/" + ns }

func (p *plan) remember(gk schema.GroupKind, ns string, items []*unstructured.Unstructured) {
	p.listedMu.Lock()
	defer p.listedMu.Unlock()
	p.listed[listKey(gk, ns)] = items
}

// explain adds each object's origin to an error of fluxcd/pkg/ssa, which
// names objects as Kind/namespace/name.
func (p *plan) explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, o := range p.objects {
		ref := RefOf(o.Unstructured)
		s := ref.Subject()
		if o.Origin != "" && containsWord(msg, s) {
			msg = replaceWord(msg, s, s+" ("+o.Origin+")")
		}
	}
	return &explained{msg: msg, err: err}
}

// explained is an error with the objects' origins written in; it still
// wraps the original, for errors.Is.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
