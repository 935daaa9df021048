package cluster

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxcd/pkg/ssa"
	"github.com/pmezard/go-difflib/difflib"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/secrets"
)

// DiffOptions say what to compare.
type DiffOptions struct {
	// Namespace is given to namespaced objects that have none, as in Apply.
	Namespace string
	// Inventory, when set, reports its members the set no longer has as
	// deleted.
	Inventory *Inventory
	// AsApplier compares each object as the server-side applier that
	// applied it (its one Apply field manager other than Sluice, such as
	// kustomize-controller) would apply it: a field that applier set and
	// the object leaves out counts as a change (it would be removed),
	// where a dry run as Sluice would keep it for its owner.
	AsApplier bool
}

// Diff reports what Apply would do, from a server-side dry run of each
// object: created, configured (with a unified diff of the YAML, managed
// fields, status and server-set metadata left out), unchanged, or deleted
// (inventory members the set no longer has). Secret values are masked.
func (c *Client) Diff(ctx context.Context, objs []Object, o DiffOptions) (*Result, error) {
	if o.Namespace == "" {
		o.Namespace = c.Namespace
	}
	p, err := c.prepare(objs, o.Namespace, o.Inventory)
	if err != nil {
		return nil, err
	}
	changes := make([]Change, len(p.objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, obj := range p.objects {
		g.Go(func() error {
			ch, err := c.diffOne(gctx, p, obj, o.AsApplier)
			changes[i] = ch
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res := &Result{Changes: changes}
	if o.Inventory != nil {
		rec, err := c.readInventory(ctx, *o.Inventory)
		if err != nil {
			return nil, err
		}
		if rec.exists {
			members, err := c.members(ctx, *o.Inventory, &record{groupKinds: union(rec.groupKinds, p.groupKinds), namespaces: union(rec.namespaces, p.namespaces)}, nil)
			if err != nil {
				return nil, err
			}
			keep := map[string]bool{}
			for _, obj := range p.objects {
				keep[RefOf(obj.Unstructured).Key()] = true
			}
			for _, m := range members {
				if !keep[RefOf(m).Key()] {
					clean(m)
					maskSecret(m)
					res.Changes = append(res.Changes, Change{Ref: RefOf(m), Action: Deleted, Diff: unified(m, nil, RefOf(m).String())})
				}
			}
		}
	}
	return res, nil
}

func (c *Client) diffOne(ctx context.Context, p *plan, obj Object, asApplier bool) (Change, error) {
	ref := RefOf(obj.Unstructured)
	ch := Change{Ref: ref, Origin: obj.Origin}
	if asApplier && !p.newKinds[ref.GroupKind()] {
		live, merged, err := c.asApplier(ctx, obj.Unstructured)
		if err != nil {
			return ch, p.explain(reachable(c.config, err))
		}
		if live != nil {
			if equality.Semantic.DeepEqual(live.Object, merged.Object) {
				ch.Action = Unchanged
				return ch, nil
			}
			maskSecret(live)
			maskSecret(merged)
			ch.Action, ch.Diff = Configured, unified(live, merged, ref.String())
			return ch, nil
		}
	}
	// Objects that need the set's own new kinds or namespaces cannot be
	// dry-run yet: they would be created.
	if p.newKinds[ref.GroupKind()] {
		desired := obj.DeepCopy()
		maskSecret(desired)
		ch.Action, ch.Diff = Created, unified(nil, desired, ref.String())
		return ch, nil
	}
	entry, live, merged, err := c.rm.Diff(ctx, obj.DeepCopy(), ssa.DefaultDiffOptions())
	if err != nil {
		if ns := obj.GetNamespace(); ns != "" && strings.Contains(err.Error(), "namespaces \""+ns+"\" not found") {
			desired := obj.DeepCopy()
			maskSecret(desired)
			ch.Action, ch.Diff = Created, unified(nil, desired, ref.String())
			return ch, nil
		}
		return ch, p.explain(reachable(c.config, err))
	}
	ch.Action = Action(entry.Action)
	switch ch.Action {
	case Created:
		clean(merged)
		maskSecret(merged)
		ch.Diff = unified(nil, merged, ref.String())
	case Configured:
		clean(live)
		clean(merged)
		if equality.Semantic.DeepEqual(live.Object, merged.Object) {
			// Only what no one reads changes (Sluice's own digest of
			// what it applied, or who manages which field): an object
			// another tool applied alike is unchanged.
			ch.Action = Unchanged
			break
		}
		ch.Diff = unified(live, merged, ref.String())
	}
	return ch, nil
}

// clean removes what the server sets and no one writes.
func clean(u *unstructured.Unstructured) {
	if u == nil {
		return
	}
	delete(u.Object, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "selfLink"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	if a := u.GetAnnotations(); a != nil {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		delete(a, annotationApplied) // Sluice's own digest: noise in a diff
		if len(a) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		} else {
			u.SetAnnotations(a)
		}
	}
}

// maskSecret hides the values of a Secret that the dry run did not mask
// (one shown whole, as created or deleted).
func maskSecret(u *unstructured.Unstructured) {
	if u == nil || !secrets.Is(u.GetAPIVersion(), u.GetKind()) {
		return
	}
	if sd, ok, _ := unstructured.NestedMap(u.Object, "stringData"); ok {
		data, _, _ := unstructured.NestedMap(u.Object, "data")
		if data == nil {
			data = map[string]any{}
		}
		for k, v := range sd {
			s, _ := v.(string)
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
		unstructured.SetNestedMap(u.Object, data, "data")
		delete(u.Object, "stringData")
	}
	ssa.SanitizeUnstructuredData(nil, u)
}

// unified diffs two objects' YAML; nil stands for absent.
func unified(from, to *unstructured.Unstructured, name string) string {
	return unifiedNamed(from, to, "live/"+name, "merged/"+name)
}

// unifiedNamed diffs two objects' YAML under the names given.
func unifiedNamed(from, to *unstructured.Unstructured, fromName, toName string) string {
	a, b := "", ""
	if from != nil {
		data, _ := yaml.Marshal(from.Object)
		a = string(data)
	} else {
		fromName = "/dev/null"
	}
	if to != nil {
		data, _ := yaml.Marshal(to.Object)
		b = string(data)
	} else {
		toName = "/dev/null"
	}
	text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b), FromFile: fromName, ToFile: toName, Context: 3,
	})
	return text
}

// SortChanges orders changes as kubectl prints them: by kind, then
// namespace and name.
func SortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Ref.String() < cs[j].Ref.String() })
}

// asApplier dry-runs obj as the one server-side applier of the live
// object other than Sluice: the live object and the result, cleaned, or
// nils when there is no live object or no single such applier.
func (c *Client) asApplier(ctx context.Context, obj *unstructured.Unstructured) (live, merged *unstructured.Unstructured, err error) {
	live = &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	applier := ""
	for _, m := range live.GetManagedFields() {
		if m.Operation != metav1.ManagedFieldsOperationApply || m.Manager == FieldManager || m.Manager == applier {
			continue
		}
		if applier != "" {
			return nil, nil, nil // two appliers: neither speaks for the object
		}
		applier = m.Manager
	}
	if applier == "" {
		return nil, nil, nil
	}
	merged = obj.DeepCopy()
	if a := merged.GetAnnotations(); a != nil {
		delete(a, annotationApplied) // Sluice's own bookkeeping
		merged.SetAnnotations(a)
	}
	if err := c.client.Patch(ctx, merged, client.Apply, client.FieldOwner(applier), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, nil, err
	}
	clean(live)
	clean(merged)
	return live, merged, nil
}
