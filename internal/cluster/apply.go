package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyOptions say how to apply a set.
type ApplyOptions struct {
	// Namespace is given to namespaced objects that have none; the default
	// is the client's (the kubeconfig context's) namespace.
	Namespace string `json:"namespace,omitempty"`
	// Inventory records the set on the cluster so that a later apply can
	// prune; nil applies without one.
	Inventory *Inventory `json:"inventory,omitempty"`
	// Prune deletes the inventory's members the set no longer has.
	Prune bool `json:"prune"`
	// Wait waits until every object is ready (kstatus), up to Timeout.
	Wait bool `json:"wait"`
	// Timeout bounds the waits (for CRDs to be established, and Wait);
	// the default is 5 minutes.
	Timeout time.Duration `json:"timeout"`
	// ContinueOnError applies every object that can be, reporting the
	// others, instead of applying nothing when one fails its dry run.
	ContinueOnError bool `json:"continueOnError"`
	// Force recreates objects whose change touches an immutable field.
	Force bool `json:"force"`
	// TakeOver makes Sluice the sole owner of the fields other deployers
	// set (server-side appliers such as Flux, kubectl and Helm), so the set
	// replaces what they applied: a field the set leaves out is removed
	// rather than kept for its former owner. Controllers' own updates
	// (replicas set by an autoscaler, say) stay theirs.
	TakeOver bool `json:"takeOver,omitempty"`
}

// takeOverManagers are the managers TakeOver moves to Sluice: every
// server-side applier (the empty prefix matches all), and the client-side
// updates of kubectl, Helm and Argo CD.
var takeOverManagers = []ssa.FieldManager{
	{Name: "", OperationType: metav1.ManagedFieldsOperationApply},
	{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "helm", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "argocd", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
}

// Action is what an apply did, or would do, to an object.
type Action string

// Actions, as kubectl prints them.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	Deleted    Action = "deleted"
	Failed     Action = "failed"
	Skipped    Action = "skipped"
)

// Change is what happened to one object.
type Change struct {
	Ref    Ref    `json:"ref"`
	Action Action `json:"action"`
	Origin string `json:"origin,omitempty"`
	// Reason says why, where the action needs saying why (an object a
	// session leaves on the cluster because its owner would not prune it).
	Reason string `json:"reason,omitempty"`
	// Diff is the unified diff of the object (Diff only).
	Diff  string `json:"diff,omitempty"`
	Error string `json:"error,omitempty"`
}

// Result is what an apply or a diff did.
type Result struct {
	Changes []Change `json:"changes"`
	// NotReady lists the objects a wait gave up on, and why.
	NotReady []Readiness `json:"notReady,omitempty"`
}

// Changed reports whether anything was (or would be) created, configured
// or deleted.
func (r *Result) Changed() bool {
	for _, c := range r.Changes {
		switch c.Action {
		case Created, Configured, Deleted:
			return true
		}
	}
	return false
}

// Count returns how many changes have the action.
func (r *Result) Count(a Action) int {
	n := 0
	for _, c := range r.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

func (o *ApplyOptions) defaults(c *Client) {
	if o.Namespace == "" {
		o.Namespace = c.Namespace
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
}

// Apply applies a set with server-side apply: definitions first (CRDs,
// Namespaces, ClusterRoles), waited on until established, then the rest.
// Unless ContinueOnError, nothing is applied when an object fails its dry
// run (objects that need the set's own new CRDs or Namespaces can only be
// dry-run once those exist). With an inventory, the parent records the set
// before any member is applied, so an interrupted apply leaves nothing
// untracked; a retried apply converges.
func (c *Client) Apply(ctx context.Context, objs []Object, o ApplyOptions) (*Result, error) {
	o.defaults(c)
	p, err := c.prepare(objs, o.Namespace, o.Inventory)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	var rec, grown *record
	deferred := false
	if o.Inventory != nil {
		if rec, err = c.readInventory(ctx, *o.Inventory); err != nil {
			return nil, err
		}
		grown = &record{groupKinds: union(rec.groupKinds, p.groupKinds), namespaces: union(rec.namespaces, p.namespaces)}
		if rec.exists && rec.covers(grown) {
			// The parent already records all the set has: nothing to write.
		} else if p.createsNamespace(o.Inventory.Namespace) && !c.namespaceExists(ctx, o.Inventory.Namespace) {
			// The parent lives in a namespace the set creates: it is
			// written as soon as the namespace is there.
			deferred = true
		} else if err := c.writeInventory(ctx, *o.Inventory, grown); err != nil {
			return nil, err
		}
	}
	opts := ssa.DefaultApplyOptions()
	opts.Force = o.Force
	if o.TakeOver {
		opts.Cleanup.FieldManagers = takeOverManagers
	}
	opts.WaitInterval = 100 * time.Millisecond
	opts.WaitTimeout = o.Timeout

	// When definitions change, check what can be checked of the rest
	// before touching anything.
	sameDefs, changedDefs, err := c.unchanged(ctx, p, p.defs)
	if err != nil {
		return nil, err
	}
	if len(changedDefs) > 0 && !o.ContinueOnError {
		if err := c.dryRun(ctx, p); err != nil {
			return nil, err
		}
	}
	if len(p.defs) > 0 {
		entries, err := c.applyStage(ctx, p, sameDefs, changedDefs, opts, o.ContinueOnError)
		res.Changes = append(res.Changes, entries...)
		if err != nil {
			return res, err
		}
		if (&Result{Changes: entries}).Changed() || len(p.newKinds) > 0 {
			if err := c.waitDefinitions(ctx, p, o.Timeout); err != nil {
				return res, err
			}
		}
		if deferred {
			if err := c.writeInventory(ctx, *o.Inventory, grown); err != nil {
				return res, err
			}
		}
	}
	if len(p.rest) > 0 {
		same, changed, err := c.unchanged(ctx, p, p.rest)
		if err != nil {
			return res, err
		}
		entries, err := c.applyStage(ctx, p, same, changed, opts, o.ContinueOnError)
		res.Changes = append(res.Changes, entries...)
		if err != nil {
			return res, err
		}
	}
	if o.Inventory != nil {
		if o.Prune {
			deleted, err := c.prune(ctx, *o.Inventory, rec, p)
			res.Changes = append(res.Changes, deleted...)
			if err != nil {
				return res, err
			}
			final := &record{groupKinds: p.groupKinds, namespaces: p.namespaces}
			if !(rec.exists && rec.equals(final)) {
				if err := c.writeInventory(ctx, *o.Inventory, final); err != nil {
					return res, err
				}
			}
		} else if deferred || !(rec.exists && rec.covers(grown)) {
			if err := c.writeInventory(ctx, *o.Inventory, grown); err != nil {
				return res, err
			}
		}
	}
	if o.Wait {
		ready, err := c.Wait(ctx, objectsOf(p.objects), o.Timeout)
		res.NotReady = ready
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

func objectsOf(objs []Object) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.Unstructured
	}
	return out
}

// applyStage applies one stage (same, its objects known unchanged, and
// stage, the others): all of it or nothing (when a dry run fails), or,
// with continueOnError, each object on its own.
func (c *Client) applyStage(ctx context.Context, p *plan, same []Ref, stage []*unstructured.Unstructured, opts ssa.ApplyOptions, continueOnError bool) ([]Change, error) {
	var changes []Change
	for _, ref := range same {
		changes = append(changes, Change{Ref: ref, Action: Unchanged, Origin: p.origins[ref.Key()]})
	}
	if len(stage) == 0 {
		return changes, nil
	}
	if !continueOnError {
		cs, err := c.rm.ApplyAll(ctx, stage, opts)
		changes = append(changes, c.changes(p, cs)...)
		if err != nil {
			return changes, p.explain(reachable(c.config, err))
		}
		return changes, nil
	}
	var errs []error
	for _, u := range stage {
		e, err := c.rm.Apply(ctx, u, opts)
		ref := RefOf(u)
		if err != nil {
			changes = append(changes, Change{Ref: ref, Action: Failed, Origin: p.origins[ref.Key()], Error: err.Error()})
			errs = append(errs, p.explain(reachable(c.config, err)))
			if IsUnreachable(err) {
				break
			}
			continue
		}
		changes = append(changes, Change{Ref: ref, Action: Action(e.Action), Origin: p.origins[ref.Key()]})
	}
	return changes, errors.Join(errs...)
}

func (c *Client) changes(p *plan, cs *ssa.ChangeSet) []Change {
	if cs == nil {
		return nil
	}
	out := make([]Change, 0, len(cs.Entries))
	for _, e := range cs.Entries {
		gv := e.ObjMetadata.GroupKind
		ver := e.GroupVersion
		if i := len(gv.Group); i > 0 && len(ver) > i && ver[:i] == gv.Group {
			ver = ver[i+1:]
		}
		ref := Ref{Group: gv.Group, Version: ver, Kind: gv.Kind, Namespace: e.ObjMetadata.Namespace, Name: e.ObjMetadata.Name}
		out = append(out, Change{Ref: ref, Action: Action(e.Action), Origin: p.origins[ref.Key()]})
	}
	return out
}

// dryRun dry-runs every object that can be before the set's definitions
// exist: those of known kinds in namespaces the cluster already has.
func (c *Client) dryRun(ctx context.Context, p *plan) error {
	existing := map[string]bool{}
	var errs []error
	for _, u := range p.rest {
		if p.newKinds[u.GroupVersionKind().GroupKind()] {
			continue
		}
		if ns := u.GetNamespace(); ns != "" {
			ok, seen := existing[ns]
			if !seen {
				ok = c.namespaceExists(ctx, ns)
				existing[ns] = ok
			}
			if !ok {
				continue
			}
		}
		obj := u.DeepCopy()
		err := c.client.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			ref := RefOf(u)
			errs = append(errs, fmt.Errorf("%s (%s) dry-run failed: %w", ref.Subject(), p.origins[ref.Key()], reachable(c.config, err)))
		}
	}
	return errors.Join(errs...)
}

// waitDefinitions waits until the set's CRDs are established and its
// namespaces active, so the objects that need them can be applied.
func (c *Client) waitDefinitions(ctx context.Context, p *plan, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, u := range p.defs {
		ref := RefOf(u)
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(u.GroupVersionKind())
			if err := c.client.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
			return definitionReady(live), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for %s (%s): %w", ref, p.origins[ref.Key()], err)
		}
	}
	// A new kind is served once discovery shows it; the mapper must see it
	// before objects of that kind can be applied.
	for gk := range p.newKinds {
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := c.mapper.RESTMapping(gk)
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for kind %s to be served: %w", gk, err)
		}
	}
	return nil
}

func definitionReady(u *unstructured.Unstructured) bool {
	switch u.GetKind() {
	case "CustomResourceDefinition":
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == string(metav1.ConditionTrue) {
				return true
			}
		}
		return false
	case "Namespace":
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		return phase == "" || phase == "Active"
	}
	return true
}

// prune deletes the inventory's members the set no longer has: objects
// first, then the definitions (Namespaces, CRDs) last.
func (c *Client) prune(ctx context.Context, inv Inventory, rec *record, p *plan) ([]Change, error) {
	all := &record{groupKinds: union(rec.groupKinds, p.groupKinds), namespaces: union(rec.namespaces, p.namespaces)}
	members, err := c.members(ctx, inv, all, p.listed)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, o := range p.objects {
		keep[RefOf(o.Unstructured).Key()] = true
	}
	var stale []*unstructured.Unstructured
	for _, m := range members {
		if !keep[RefOf(m).Key()] {
			stale = append(stale, m)
		}
	}
	return c.Delete(ctx, stale)
}

// Delete deletes objects (in the background: dependents follow through
// the garbage collector), the definitions (Namespaces, CRDs) last so the
// objects they hold go first. Objects already gone count as deleted.
func (c *Client) Delete(ctx context.Context, objs []*unstructured.Unstructured) ([]Change, error) {
	objs = append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(objs, func(i, j int) bool {
		return !isDefinition(objs[i]) && isDefinition(objs[j])
	})
	var changes []Change
	for _, u := range objs {
		err := c.client.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return changes, fmt.Errorf("deleting %s: %w", RefOf(u).Subject(), reachable(c.config, err))
		}
		changes = append(changes, Change{Ref: RefOf(u), Action: Deleted})
	}
	return changes, nil
}

// createsNamespace reports whether the set holds the Namespace ns.
func (p *plan) createsNamespace(ns string) bool {
	for _, u := range p.defs {
		if u.GetKind() == "Namespace" && u.GetName() == ns {
			return true
		}
	}
	return false
}

func (c *Client) namespaceExists(ctx context.Context, ns string) bool {
	n := &unstructured.Unstructured{}
	n.SetAPIVersion("v1")
	n.SetKind("Namespace")
	return c.client.Get(ctx, client.ObjectKey{Name: ns}, n) == nil
}

func isDefinition(u *unstructured.Unstructured) bool {
	switch u.GetKind() {
	case "CustomResourceDefinition", "Namespace", "ClusterRole":
		return true
	}
	return false
}

func union[K comparable](a, b map[K]bool) map[K]bool {
	out := make(map[K]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
