package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
)

// Restoration is what restoring a session did.
type Restoration struct {
	Session string `json:"session"`
	// Deleted are the objects the session had created.
	Deleted []cluster.Ref `json:"deleted,omitempty"`
	// Restored are the objects put back to their state before the session
	// (recreated, where it had deleted them).
	Restored []cluster.Ref `json:"restored,omitempty"`
	// Resumed are the GitOps owners handed back, with their prior settings.
	Resumed []cluster.Ref `json:"resumed,omitempty"`
	// Kept are the objects a handed-over session left for GitOps.
	Kept []cluster.Ref `json:"kept,omitempty"`
	// Skipped says which objects were left alone, and why (another session
	// holds them now).
	Skipped []string `json:"skipped,omitempty"`
	// BySession says the session put things back itself, asked to stop
	// from elsewhere.
	BySession bool `json:"bySession,omitempty"`
}

// restore puts back everything a session's record says it changed:
// objects it created are deleted, objects it modified or deleted get their
// saved state back, owners are resumed with their prior settings and asked
// to reconcile. Every step looks at the cluster first, so running it again
// after an interruption finishes the job without undoing anything.
func restore(ctx context.Context, c *cluster.Client, rec *Record) (*Restoration, error) {
	r := &Restoration{Session: rec.Name}
	kube := c.Kube()
	var errs []error
	heldByOther := func(u *unstructured.Unstructured) bool {
		by := u.GetAnnotations()[annotationSession]
		if by != "" && by != rec.Name {
			r.Skipped = append(r.Skipped, fmt.Sprintf("%s: held by session %s now", cluster.RefOf(u).Subject(), by))
			return true
		}
		return false
	}

	// Objects the session created go, unless someone else's now.
	var doomed []*unstructured.Unstructured
	for _, ref := range rec.Created {
		live, err := getRef(ctx, kube, ref)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", ref.Subject(), err))
			continue
		}
		if live.GetAnnotations()[annotationSession] == "" || heldByOther(live) {
			continue // not the object the session created
		}
		doomed = append(doomed, live)
	}
	sort.Slice(doomed, func(i, j int) bool { return cluster.RefOf(doomed[i]).String() < cluster.RefOf(doomed[j]).String() })
	deleted, err := c.Delete(ctx, doomed)
	for _, ch := range deleted {
		r.Deleted = append(r.Deleted, ch.Ref)
	}
	if err != nil {
		errs = append(errs, err)
	}

	// Saved objects come back, definitions first so what they hold can.
	saved := append([]Saved(nil), rec.Saved...)
	sort.SliceStable(saved, func(i, j int) bool {
		if di, dj := isDefinition(saved[i].Ref), isDefinition(saved[j].Ref); di != dj {
			return di
		}
		return saved[i].Ref.String() < saved[j].Ref.String()
	})
	for _, sv := range saved {
		done, err := restoreObject(ctx, kube, sv, heldByOther)
		if err != nil {
			errs = append(errs, err)
		} else if done {
			r.Restored = append(r.Restored, sv.Ref)
		}
	}

	// Owners resume last, so their tools reconcile from the state restored.
	for _, o := range rec.Owners {
		if err := resume(ctx, kube, o, rec.Name, r.Restored); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Resumed = append(r.Resumed, o.Ref)
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("restoring session %s (run `sluice run cleanup` to finish): %w", rec.Name, errors.Join(errs...))
	}
	return r, nil
}

func isDefinition(ref cluster.Ref) bool {
	return ref.Group == "" && ref.Kind == "Namespace" || ref.Group == "apiextensions.k8s.io" && ref.Kind == "CustomResourceDefinition"
}

// restoreObject puts one object back as saved: recreated if gone,
// replaced (content, then its managed fields) if changed. It reports
// whether it changed anything.
func restoreObject(ctx context.Context, kube client.Client, sv Saved, heldByOther func(*unstructured.Unstructured) bool) (bool, error) {
	want := &unstructured.Unstructured{}
	if err := json.Unmarshal(sv.Object, &want.Object); err != nil {
		return false, fmt.Errorf("restoring %s: saved state: %w", sv.Ref.Subject(), err)
	}
	for attempt := 0; ; attempt++ {
		live, err := getRef(ctx, kube, sv.Ref)
		switch {
		case apierrors.IsNotFound(err):
			obj := want.DeepCopy()
			for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"} {
				unstructured.RemoveNestedField(obj.Object, "metadata", f)
			}
			if err := kube.Create(ctx, obj); err != nil {
				if apierrors.IsAlreadyExists(err) && attempt < 5 {
					continue
				}
				return false, fmt.Errorf("recreating %s: %w", sv.Ref.Subject(), err)
			}
			// A create makes its client the manager of every field: the
			// managed fields go back to what they were, so that the tool
			// that applied the object (Flux, Helm) owns it again and can
			// still remove a field from it.
			return true, resetManagedFields(ctx, kube, obj, want)
		case err != nil:
			return false, fmt.Errorf("reading %s: %w", sv.Ref.Subject(), err)
		}
		if heldByOther(live) {
			return false, nil
		}
		if sameContent(live, want) {
			return false, resetManagedFields(ctx, kube, live, want)
		}
		obj := want.DeepCopy()
		obj.SetResourceVersion(live.GetResourceVersion())
		obj.SetUID(live.GetUID())
		if err := kube.Update(ctx, obj); err != nil {
			if apierrors.IsConflict(err) && attempt < 5 {
				continue
			}
			return false, fmt.Errorf("restoring %s: %w", sv.Ref.Subject(), err)
		}
		return true, resetManagedFields(ctx, kube, obj, want)
	}
}

// resetManagedFields gives the object the managed fields it had: an update
// that sets managedFields and changes nothing else makes them exactly so,
// and the tools that owned fields own them again.
func resetManagedFields(ctx context.Context, kube client.Client, live, want *unstructured.Unstructured) error {
	mf := want.GetManagedFields()
	if len(mf) == 0 || reflect.DeepEqual(live.GetManagedFields(), mf) {
		return nil
	}
	obj := live.DeepCopy()
	obj.SetManagedFields(mf)
	if err := kube.Update(ctx, obj); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("restoring the managed fields of %s: %w", cluster.RefOf(live).Subject(), err)
	}
	return nil
}

// sameContent compares two states of an object as a person would: not
// the server's bookkeeping (resource versions, managed fields, generation,
// timestamps) nor status.
func sameContent(a, b *unstructured.Unstructured) bool {
	return reflect.DeepEqual(ownContent(a), ownContent(b))
}

// ownContent is an object without what the server alone sets: resource
// version, managed fields, generation, timestamps, status.
func ownContent(u *unstructured.Unstructured) map[string]any {
	obj := u.DeepCopy().Object
	delete(obj, "status")
	for _, f := range []string{"resourceVersion", "managedFields", "generation", "creationTimestamp", "deletionTimestamp"} {
		unstructured.RemoveNestedField(obj, "metadata", f)
	}
	return obj
}
