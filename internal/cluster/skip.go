package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationApplied holds a digest of the object as Sluice last applied
// it: its own bookkeeping, no part of what an object says.
const AnnotationApplied = "sluice.dev/applied"

const annotationApplied = AnnotationApplied

// stamp records on the object a digest of itself, as about to be applied.
func stamp(u *unstructured.Unstructured) {
	a := u.GetAnnotations()
	delete(a, annotationApplied)
	u.SetAnnotations(a)
	data, _ := json.Marshal(u.Object) // plain data: cannot fail
	sum := sha256.Sum256(data)
	if a == nil {
		a = map[string]string{}
	}
	a[annotationApplied] = hex.EncodeToString(sum[:16])
	u.SetAnnotations(a)
}

// unchanged splits a stage into the objects that certainly need no apply
// and the rest. An object needs none when the live one carries the same
// digest (so Sluice last applied exactly this set of fields: none would be
// removed) and holds every value the object sets (so nothing drifted).
// Anything else, the dry run decides. A no-op reapply then costs one GET
// per object, not a GET and a dry-run patch.
func (c *Client) unchanged(ctx context.Context, p *plan, stage []*unstructured.Unstructured) (same []Ref, rest []*unstructured.Unstructured, err error) {
	live, err := c.lives(ctx, p, stage)
	if err != nil {
		return nil, nil, err
	}
	keep := make([]bool, len(stage))
	for i, u := range stage {
		l := live[i]
		keep[i] = l != nil && l.GetAnnotations()[annotationApplied] == u.GetAnnotations()[annotationApplied] &&
			l.GetDeletionTimestamp() == nil && Subset(u.Object, l.Object)
	}
	for i, u := range stage {
		if keep[i] {
			same = append(same, RefOf(u))
		} else {
			rest = append(rest, u)
		}
	}
	return same, rest, nil
}

// lives reads the live object of each of objs (nil where absent). Members
// of an inventory are listed by kind and namespace, a few requests for
// the lot; others are read one by one, in parallel.
func (c *Client) lives(ctx context.Context, p *plan, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	inv := p.inventory
	out := make([]*unstructured.Unstructured, len(objs))
	type group struct {
		gvk     schema.GroupVersionKind
		ns      string
		indexes []int
	}
	groups := map[string]*group{}
	var singles []int
	for i, u := range objs {
		if inv == nil {
			singles = append(singles, i)
			continue
		}
		key := u.GroupVersionKind().String() + "/" + u.GetNamespace()
		g, ok := groups[key]
		if !ok {
			g = &group{gvk: u.GroupVersionKind(), ns: u.GetNamespace()}
			groups[key] = g
		}
		g.indexes = append(g.indexes, i)
	}
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(32)
	for _, g := range groups {
		if len(g.indexes) < 3 {
			singles = append(singles, g.indexes...)
			continue
		}
		eg.Go(func() error {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(g.gvk.GroupVersion().WithKind(g.gvk.Kind + "List"))
			opts := []client.ListOption{client.MatchingLabels{labelPartOf: inv.ID()}}
			if g.ns != "" {
				opts = append(opts, client.InNamespace(g.ns))
			}
			if err := c.client.List(gctx, l, opts...); err != nil {
				return reachable(c.config, err)
			}
			byName := map[string]*unstructured.Unstructured{}
			items := make([]*unstructured.Unstructured, len(l.Items))
			for j := range l.Items {
				byName[l.Items[j].GetName()] = &l.Items[j]
				items[j] = &l.Items[j]
			}
			p.remember(g.gvk.GroupKind(), g.ns, items)
			for _, i := range g.indexes {
				out[i] = byName[objs[i].GetName()]
			}
			return nil
		})
	}
	for _, i := range singles {
		u := objs[i]
		eg.Go(func() error {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			err := c.client.Get(gctx, client.ObjectKeyFromObject(u), live)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return reachable(c.config, err)
			}
			out[i] = live
			return nil
		})
	}
	return out, eg.Wait()
}

// Subset reports whether every value in want is in have: maps key by key,
// lists element by element (of equal length), numbers by value.
func Subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			hv, ok := h[k]
			if !ok {
				if v == nil {
					continue
				}
				return false
			}
			if !Subset(v, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !Subset(w[i], h[i]) {
				return false
			}
		}
		return true
	case int64, float64, int, int32:
		wf, ok1 := number(want)
		hf, ok2 := number(have)
		return ok1 && ok2 && wf == hf
	}
	return reflect.DeepEqual(want, have)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
