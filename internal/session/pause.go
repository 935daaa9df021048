package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"sluice.dev/sluice/internal/cluster"
)

// Pause says how much of GitOps a session pauses.
type Pause string

// Pauses.
const (
	// PauseObject pauses only the objects the session changes, where the
	// owner's controller honours that (a Flux Kustomization), and the
	// owner where it does not: the narrowest pause that holds. The default.
	PauseObject Pause = "object"
	// PauseOwner suspends every owner of what the session changes.
	PauseOwner Pause = "owner"
)

// How is the way one owner is paused.
type How string

// Ways to pause an owner.
const (
	// HowObjects marks the session's objects of a Flux Kustomization
	// kustomize.toolkit.fluxcd.io/reconcile: disabled; the Kustomization
	// goes on reconciling every other object from git.
	HowObjects How = "objects"
	// HowSuspend sets a Flux Kustomization's or HelmRelease's spec.suspend.
	HowSuspend How = "suspend"
	// HowAutoSyncOff removes an Argo CD Application's automated sync.
	HowAutoSyncOff How = "autosync-off"
	// HowSkipReconcile sets argocd.argoproj.io/skip-reconcile on an Argo
	// CD Application, where something puts its syncPolicy back.
	HowSkipReconcile How = "skip-reconcile"
)

// Marks that GitOps controllers honour.
const (
	// annotationFluxReconcile is what kustomize-controller skips, both
	// when applying and when pruning.
	annotationFluxDisabled = "kustomize.toolkit.fluxcd.io/reconcile"
	fluxDisabled           = "disabled"
	annotationArgoSkip     = "argocd.argoproj.io/skip-reconcile"
	// annotationMarkedBy records that Sluice set the parent's mark on an
	// owner, so that only Sluice's own mark is taken off.
	annotationMarkedBy = "sluice.dev/marked-for-parent"
)

var argoApplicationSet = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet"}

// how works out the narrowest pause of an owner that holds, and why.
// With suspend, a Flux Kustomization is suspended rather than its objects
// marked.
func (s *Session) how(ctx context.Context, owner *unstructured.Unstructured, suspend bool) (Owner, error) {
	ref := cluster.RefOf(owner)
	o := Owner{Ref: ref}
	parents, err := s.owners(ctx, owner)
	if err != nil {
		return o, err
	}
	var fluxParent, argoParent *cluster.Ref
	for i, p := range parents {
		if sameObject(p, ref) {
			continue // flux-system applies itself
		}
		switch p.Kind {
		case fluxKustomization.Kind:
			fluxParent = &parents[i]
		case argoApplication.Kind:
			argoParent = &parents[i]
		}
	}
	switch ref.Kind {
	case fluxKustomization.Kind:
		switch {
		case s.o.Pause == PauseOwner:
			o.How, o.Why = HowSuspend, "--pause owner"
		case suspend:
			o.How = HowSuspend // the caller says why
		default:
			o.How = HowObjects
		}
	case fluxHelmRelease.Kind:
		o.How = HowSuspend
		o.Why = "a HelmRelease's objects are one Helm release, upgraded whole: only suspending it holds"
	case argoApplication.Kind:
		o.How = HowAutoSyncOff
		if set := controllerOf(owner, argoApplicationSet.Kind); set != "" {
			how, why, err := s.underApplicationSet(ctx, owner, set)
			if err != nil {
				return o, err
			}
			o.How, o.Why = how, why
		} else if argoParent != nil {
			o.How = HowSkipReconcile
			o.Why = fmt.Sprintf("applied by %s, which puts its syncPolicy back from git", argoParent.Subject())
		}
	}
	if fluxParent != nil && o.How != HowObjects {
		// The parent applies this owner from git: it would put back a
		// suspend or sync policy git sets, unless it leaves the owner alone.
		o.Parent = fluxParent
		if o.Why == "" {
			o.Why = fmt.Sprintf("marked %s=%s so that %s, which applies it, leaves it paused", annotationFluxDisabled, fluxDisabled, fluxParent.Subject())
		}
	}
	o.Prior = priorOf(owner, o.How)
	o.Revision = gitRevision(ctx, s, owner)
	return o, nil
}

// controllerOf is the name of the object of that kind that controls u.
func controllerOf(u *unstructured.Unstructured, kind string) string {
	for _, r := range u.GetOwnerReferences() {
		if r.Kind == kind && strings.HasPrefix(r.APIVersion, argoApplicationSet.Group+"/") {
			return r.Name
		}
	}
	return ""
}

// underApplicationSet decides how to pause an Application an ApplicationSet
// generated: the ApplicationSet controller puts back its spec and
// annotations on every reconcile, except what the ApplicationSet tells it
// to leave (ignoreApplicationDifferences, preservedFields, a sync policy
// that never updates).
func (s *Session) underApplicationSet(ctx context.Context, app *unstructured.Unstructured, name string) (How, string, error) {
	setRef := cluster.Ref{Group: argoApplicationSet.Group, Version: argoApplicationSet.Version, Kind: argoApplicationSet.Kind, Namespace: app.GetNamespace(), Name: name}
	set, err := getRef(ctx, s.c.Kube(), setRef)
	if apierrors.IsNotFound(err) {
		return HowAutoSyncOff, "", nil // orphaned: nothing puts it back
	}
	if err != nil {
		return "", "", fmt.Errorf("reading %s, which generates %s: %w", setRef.Subject(), cluster.RefOf(app).Subject(), err)
	}
	policy, _, _ := unstructured.NestedString(set.Object, "spec", "syncPolicy", "applicationsSync")
	if policy == "create-only" || policy == "create-delete" {
		return HowAutoSyncOff, fmt.Sprintf("generated by %s, whose applicationsSync %s never updates it", setRef.Subject(), policy), nil
	}
	ignored := ignoredPaths(set, app.GetName())
	for _, p := range []string{"/spec/syncPolicy/automated", "/spec/syncPolicy", "/spec"} {
		if slices.Contains(ignored, p) {
			return HowAutoSyncOff, fmt.Sprintf("generated by %s, which ignores differences in %s", setRef.Subject(), p), nil
		}
	}
	preserved, _, _ := unstructured.NestedStringSlice(set.Object, "spec", "preservedFields", "annotations")
	skip := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(annotationArgoSkip, "~", "~0"), "/", "~1")
	if slices.Contains(preserved, annotationArgoSkip) || slices.Contains(ignored, skip) || slices.Contains(ignored, "/metadata/annotations") {
		return HowSkipReconcile, fmt.Sprintf("generated by %s, which preserves %s (and would put the syncPolicy back)", setRef.Subject(), annotationArgoSkip), nil
	}
	return "", "", fmt.Errorf("%s is generated by %s, which puts the Application's syncPolicy and annotations back, so no pause of it would hold: "+
		"add `ignoreApplicationDifferences: [{jsonPointers: [/spec/syncPolicy/automated]}]` (or `preservedFields: {annotations: [%s]}`) to the ApplicationSet's spec, and start the session again",
		cluster.RefOf(app).Subject(), setRef.Subject(), annotationArgoSkip)
}

// ignoredPaths are the JSON pointers an ApplicationSet ignores for the
// Application named app (jq paths of the simple .a.b form included).
func ignoredPaths(set *unstructured.Unstructured, app string) []string {
	rules, _, _ := unstructured.NestedSlice(set.Object, "spec", "ignoreApplicationDifferences")
	var out []string
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if n, _ := rule["name"].(string); n != "" && n != app {
			continue
		}
		ptrs, _, _ := unstructured.NestedStringSlice(rule, "jsonPointers")
		out = append(out, ptrs...)
		jq, _, _ := unstructured.NestedStringSlice(rule, "jqPathExpressions")
		for _, e := range jq {
			if strings.HasPrefix(e, ".") && !strings.ContainsAny(e, "[]|() ") {
				out = append(out, strings.ReplaceAll(e, ".", "/"))
			}
		}
	}
	return out
}

// pauseField is the path of the setting that pauses an owner, and the
// value that does (nil: the field removed); none for HowObjects.
func pauseField(how How, kind string) ([]string, any) {
	switch how {
	case HowObjects:
		return nil, nil
	case HowSkipReconcile:
		return []string{"metadata", "annotations", annotationArgoSkip}, "true"
	case HowAutoSyncOff:
		return []string{"spec", "syncPolicy", "automated"}, nil
	case HowSuspend:
		return []string{"spec", "suspend"}, true
	}
	// Records written before owners had a How: by kind.
	if kind == argoApplication.Kind {
		return pauseField(HowAutoSyncOff, kind)
	}
	return pauseField(HowSuspend, kind)
}

// Paused describes one owner's pause, as `sluice run list` shows it.
func (o Owner) Paused() string {
	var what string
	switch o.How {
	case HowObjects:
		what = fmt.Sprintf("%d object(s) marked %s=%s, the rest still reconciled", len(o.Objects), annotationFluxDisabled, fluxDisabled)
	case HowSkipReconcile:
		what = annotationArgoSkip + "=true"
	case HowAutoSyncOff:
		what = "automated sync off"
	default:
		what = "suspended"
	}
	s := o.Ref.Subject() + ": " + what
	if o.Why != "" {
		s += " (" + o.Why + ")"
	}
	return s
}

// held checks that an owner's pause still holds: that nothing (a parent
// applying git, an ApplicationSet, a person) put the owner's setting or
// an object's mark back. u is the owner as it is now. It returns why not,
// naming who did, or "".
func held(ctx context.Context, s *Session, o Owner, u *unstructured.Unstructured) (string, error) {
	if o.How == HowObjects {
		for _, ref := range o.Objects {
			live, err := getRef(ctx, s.c.Kube(), ref)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return "", err
			}
			if live.GetAnnotations()[annotationSession] == s.o.Name && live.GetAnnotations()[annotationFluxDisabled] != fluxDisabled {
				return fmt.Sprintf("%s lost its %s=%s mark%s, so %s reconciles it again", ref.Subject(), annotationFluxDisabled, fluxDisabled, changedBy(live, "f:metadata", "f:annotations"), o.Ref.Subject()), nil
			}
		}
		return "", nil
	}
	path, value := pauseField(o.How, o.Ref.Kind)
	cur, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	if value == nil && found || value != nil && (!found || fmt.Sprint(cur) != fmt.Sprint(value)) {
		fields := make([]string, 0, len(path))
		for _, p := range path[:len(path)-1] {
			fields = append(fields, "f:"+p)
		}
		return fmt.Sprintf("%s is no longer paused: %s was put back%s", o.Ref.Subject(), strings.Join(path, "."), changedBy(u, fields...)), nil
	}
	if o.Parent != nil && u.GetAnnotations()[annotationFluxDisabled] != fluxDisabled {
		return fmt.Sprintf("%s lost its %s=%s mark%s, so %s applies it from git again", o.Ref.Subject(), annotationFluxDisabled, fluxDisabled, changedBy(u, "f:metadata", "f:annotations"), o.Parent.Subject()), nil
	}
	return "", nil
}

// changedBy names the field managers other than Sluice that own fields
// under a path, most recent first: who most likely put a setting back.
func changedBy(u *unstructured.Unstructured, path ...string) string {
	var names []string
	mfs := u.GetManagedFields()
	for i := len(mfs) - 1; i >= 0; i-- {
		mf := mfs[i]
		if mf.Manager == cluster.FieldManager || mf.FieldsV1 == nil || slices.Contains(names, mf.Manager) {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(mf.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(fields, path...); found {
			names = append(names, mf.Manager)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (by " + strings.Join(names, ", ") + ")"
}
