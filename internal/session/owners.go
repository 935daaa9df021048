package session

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/owner"
)

// GitOps kinds whose objects own workloads.
var (
	fluxKustomization = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
	fluxHelmRelease   = schema.GroupVersionKind{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"}
	argoApplication   = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}
)

// Owner bookkeeping on the owner object itself, so that several sessions
// suspending one owner resume it only when the last one ends.
const (
	annotationSuspendedBy = "sluice.dev/suspended-by"
	annotationPrior       = "sluice.dev/suspend-prior"
	// The requests that hand an owner back to its tool.
	annotationFluxReconcile = "reconcile.fluxcd.io/requestedAt"
	annotationArgoRefresh   = "argocd.argoproj.io/refresh"
)

// owners finds the GitOps objects that own a live object, from the labels
// and annotations Flux and Argo CD put on what they apply.
func (s *Session) owners(ctx context.Context, live *unstructured.Unstructured) ([]cluster.Ref, error) {
	objs, err := s.ownerObjects(ctx, live)
	if err != nil {
		return nil, err
	}
	refs := make([]cluster.Ref, 0, len(objs))
	for _, u := range objs {
		refs = append(refs, cluster.RefOf(u))
	}
	return refs, nil
}

// ownerObjects reads the GitOps objects that own a live object (owners).
func (s *Session) ownerObjects(ctx context.Context, live *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	labels, annotations := live.GetLabels(), live.GetAnnotations()
	var out []cluster.Ref
	add := func(gvk schema.GroupVersionKind, ns, name string) {
		if name != "" {
			out = append(out, cluster.Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: ns, Name: name})
		}
	}
	add(fluxKustomization, labels["kustomize.toolkit.fluxcd.io/namespace"], labels["kustomize.toolkit.fluxcd.io/name"])
	add(fluxHelmRelease, labels["helm.toolkit.fluxcd.io/namespace"], labels["helm.toolkit.fluxcd.io/name"])
	// Argo CD tracks by label (the app name) or by annotation
	// ("APP:GROUP/KIND:NAMESPACE/NAME"); an app outside Argo CD's own
	// namespace is written "NAMESPACE_APP".
	app := labels["argocd.argoproj.io/instance"]
	if id := annotations["argocd.argoproj.io/tracking-id"]; id != "" {
		app, _, _ = strings.Cut(id, ":")
	}
	if app != "" {
		ns, name, found := strings.Cut(app, "_")
		if !found {
			var err error
			if ns, err = s.argoNamespace(ctx, app, annotations[owner.ArgoInstallationID]); err != nil {
				return nil, err
			}
			name = app
		}
		if ns != "" {
			add(argoApplication, ns, name)
		}
	}
	// An owner the cluster does not have (its CRD or object is gone)
	// cannot be suspended, and needs not be.
	var present []*unstructured.Unstructured
	for _, ref := range out {
		u, err := s.getOwner(ctx, ref)
		switch {
		case err == nil:
			present = append(present, u)
		case !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
			return nil, fmt.Errorf("reading %s, which owns %s: %w", ref.Subject(), cluster.RefOf(live).Subject(), err)
		}
	}
	return present, nil
}

// argoNamespace finds the namespace of the Argo CD Application named app,
// of the Argo CD installation whose argocd-cm installationID is
// installation (Argo CD's mark of what it applied, "" for none): the one
// there is, or the one in "argocd" when several share the name.
func (s *Session) argoNamespace(ctx context.Context, app, installation string) (string, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(argoApplication.GroupVersion().WithKind("ApplicationList"))
	if err := s.c.Kube().List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", err
	}
	var namespaces []string
	for _, a := range l.Items {
		if a.GetName() != app {
			continue
		}
		settings, _, err := owner.ArgoSettings(ctx, s.c.Kube(), a.GetNamespace())
		if err != nil {
			return "", err
		}
		if settings["installationID"] == installation {
			namespaces = append(namespaces, a.GetNamespace())
		}
	}
	if len(namespaces) == 1 || len(namespaces) > 1 && !slices.Contains(namespaces, "argocd") {
		return namespaces[0], nil
	}
	if len(namespaces) > 1 {
		return "argocd", nil
	}
	return "", nil
}

func (s *Session) getOwner(ctx context.Context, ref cluster.Ref) (*unstructured.Unstructured, error) {
	return getRef(ctx, s.c.Kube(), ref)
}

func getRef(ctx context.Context, c client.Client, ref cluster.Ref) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: ref.Group, Version: ref.Version, Kind: ref.Kind})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return nil, err
	}
	return u, nil
}

// priorOf reads what an owner's setting was before any session paused
// it: from the owner's bookkeeping when another session holds it, else as
// it is now.
func priorOf(u *unstructured.Unstructured, how How) json.RawMessage {
	if how == HowObjects {
		return nil
	}
	if p := u.GetAnnotations()[annotationPrior]; p != "" {
		return json.RawMessage(p)
	}
	path, _ := pauseField(how, u.GetKind())
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	if !found {
		return json.RawMessage("null")
	}
	data, _ := json.Marshal(v)
	return data
}

// suspend pauses an owner for the session and adds the session to those
// holding it; where a parent applies the owner from git, the owner is
// marked for the parent to leave it alone. Objects-paused owners are left
// as they are: their objects carry the mark.
func suspend(ctx context.Context, c client.Client, o Owner, session string) error {
	if o.How == HowObjects {
		return nil
	}
	u, err := getRef(ctx, c, o.Ref)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pausing %s: %w", o.Ref.Subject(), err)
	}
	holders := splitNames(u.GetAnnotations()[annotationSuspendedBy])
	if !slices.Contains(holders, session) {
		holders = append(holders, session)
	}
	annotations := map[string]any{
		annotationSuspendedBy: strings.Join(holders, ","),
		annotationPrior:       string(o.Prior),
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": annotations}}
	if o.Parent != nil && u.GetAnnotations()[annotationFluxDisabled] != fluxDisabled {
		annotations[annotationFluxDisabled] = fluxDisabled
		annotations[annotationMarkedBy] = "true"
	}
	path, value := pauseField(o.How, o.Ref.Kind)
	if cur, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found != (value != nil) || value != nil && !reflect.DeepEqual(cur, value) {
		setPath(patch, path, value)
	}
	if err := mergePatch(ctx, c, u, patch, "pausing"); err != nil || o.Parent == nil {
		return err
	}
	return settle(ctx, c, o)
}

// settleFor is how long a pause is watched after a parent's mark: a
// reconcile of the parent already under way when the mark landed applies
// git's setting once more.
var settleFor = 2 * time.Second

// settle puts a pause back that a parent's reconcile already under way
// undid; the mark keeps the parent's next reconciles off it (and the
// heartbeat ends the session if one does not).
func settle(ctx context.Context, c client.Client, o Owner) error {
	path, value := pauseField(o.How, o.Ref.Kind)
	deadline := time.Now().Add(settleFor)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		u, err := getRef(ctx, c, o.Ref)
		if err != nil {
			return nil // the heartbeat looks again
		}
		cur, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		if found == (value != nil) && (value == nil || reflect.DeepEqual(cur, value)) {
			continue
		}
		patch := map[string]any{}
		setPath(patch, path, value)
		if err := mergePatch(ctx, c, u, patch, "pausing"); err != nil {
			return err
		}
	}
	return nil
}

// resume takes the session off an owner's holders; the last one out puts
// the owner's setting back as it was, takes Sluice's mark off it, and asks
// its tool (and the parent applying it) to reconcile now. An owner whose
// objects were marked is only asked to reconcile. restored are the objects
// just put back: an Argo CD Application is resumed once it has seen them
// (awaitArgoSees).
func resume(ctx context.Context, c client.Client, o Owner, session string, restored []cluster.Ref) error {
	u, err := getRef(ctx, c, o.Ref)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resuming %s: %w", o.Ref.Subject(), err)
	}
	annotations := map[string]any{}
	patch := map[string]any{"metadata": map[string]any{"annotations": annotations}}
	if o.How == HowObjects {
		annotations[annotationFluxReconcile] = time.Now().UTC().Format(time.RFC3339Nano)
		return mergePatch(ctx, c, u, patch, "handing back")
	}
	holders := splitNames(u.GetAnnotations()[annotationSuspendedBy])
	i := slices.Index(holders, session)
	if i < 0 && len(holders) > 0 {
		return nil // resumed already, and held by others
	}
	if i >= 0 {
		holders = slices.Delete(holders, i, i+1)
	}
	if len(holders) > 0 {
		annotations[annotationSuspendedBy] = strings.Join(holders, ",")
		return mergePatch(ctx, c, u, patch, "resuming")
	}
	prior := o.Prior
	if p := u.GetAnnotations()[annotationPrior]; p != "" {
		prior = json.RawMessage(p)
	}
	var value any
	if err := json.Unmarshal(prior, &value); err != nil {
		return fmt.Errorf("resuming %s: prior setting %s: %w", o.Ref.Subject(), prior, err)
	}
	path, _ := pauseField(o.How, o.Ref.Kind)
	if cur, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found != (value != nil) || value != nil && !reflect.DeepEqual(cur, value) {
		setPath(patch, path, value)
	}
	annotations[annotationSuspendedBy] = nil
	annotations[annotationPrior] = nil
	if u.GetAnnotations()[annotationMarkedBy] != "" {
		annotations[annotationMarkedBy] = nil
		annotations[annotationFluxDisabled] = nil
	}
	if o.Ref.Kind == argoApplication.Kind {
		annotations[annotationArgoRefresh] = "normal"
	} else {
		annotations[annotationFluxReconcile] = time.Now().UTC().Format(time.RFC3339Nano)
	}
	awaitArgoSees(ctx, c, o, restored)
	if err := mergePatch(ctx, c, u, patch, "resuming"); err != nil {
		return err
	}
	if o.Parent != nil {
		// The parent applies git's version of the owner now, rather than at
		// its next interval.
		p, err := getRef(ctx, c, *o.Parent)
		if err == nil {
			return mergePatch(ctx, c, p, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
				annotationFluxReconcile: time.Now().UTC().Format(time.RFC3339Nano)}}}, "handing back")
		}
	}
	return nil
}

// argoSettle bounds how long a hand-back waits for Argo CD to see the
// objects put back before an Application's automated sync is on again.
var argoSettle = 5 * time.Second

// argoCacheSettle is how long a hand-back gives Argo CD's cluster cache to
// take in the objects put back before an Application paused by
// skip-reconcile is compared again.
var argoCacheSettle = time.Second

// awaitArgoSees waits, before the automated sync of an Application the
// session turned off is turned on again, until Argo CD has compared the
// objects put back (restored; those it tracks) and found them as git has
// them: turned on while its cache still lacks an object just recreated,
// its self-heal syncs at once, applying the object again. An Application
// no controller reconciles (no status.reconciledAt) is not waited for;
// past argoSettle the hand-back goes on, and Argo CD syncs what it still
// finds missing.
//
// An Application paused by skip-reconcile is not compared meanwhile, so
// its status cannot say: it is resumed argoCacheSettle after the objects
// were put back, for Argo CD's cluster cache (which takes in the cluster's
// changes in batches, every 100 ms by default) to have them.
func awaitArgoSees(ctx context.Context, c client.Client, o Owner, restored []cluster.Ref) {
	if o.Ref.Kind != argoApplication.Kind || o.How != HowAutoSyncOff && o.How != HowSkipReconcile || len(restored) == 0 {
		return
	}
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	u, err := getRef(ctx, c, o.Ref)
	if err != nil || !argoReconciled(u) {
		return
	}
	if o.How == HowSkipReconcile {
		wait(argoCacheSettle)
		return
	}
	for deadline := time.Now().Add(argoSettle); !argoSees(u, restored) && time.Now().Before(deadline) && wait(100*time.Millisecond); {
		if u, err = getRef(ctx, c, o.Ref); err != nil {
			return
		}
	}
}

// argoReconciled says whether a controller reconciles the Application.
func argoReconciled(app *unstructured.Unstructured) bool {
	at, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
	return at != ""
}

// argoSees reports whether an Application's status, as its controller
// last compared it, has each of refs as git has it (or does not track it).
func argoSees(app *unstructured.Unstructured, refs []cluster.Ref) bool {
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		if m["status"] == "Synced" {
			continue
		}
		group, _ := m["group"].(string)
		kind, _ := m["kind"].(string)
		ns, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		if slices.ContainsFunc(refs, func(ref cluster.Ref) bool {
			return group == ref.Group && kind == ref.Kind && ns == ref.Namespace && name == ref.Name
		}) {
			return false
		}
	}
	return true
}

func mergePatch(ctx context.Context, c client.Client, u *unstructured.Unstructured, patch map[string]any, verb string) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, data), client.FieldOwner(cluster.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s: %w", verb, cluster.RefOf(u).Subject(), err)
	}
	return nil
}

// setPath sets a nested value in a merge patch.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
