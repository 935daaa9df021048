package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sluice.dev/sluice/internal/cluster"
)

// Kept is the action of an object the working tree no longer renders that
// its owner would not prune: the session leaves it on the cluster, as the
// owner would, and says why (Change.Reason).
const Kept cluster.Action = "kept"

// Annotations by which GitOps tools leave an object on the cluster when
// their source no longer has it.
const (
	annotationFluxPrune   = "kustomize.toolkit.fluxcd.io/prune"
	annotationArgoSync    = "argocd.argoproj.io/sync-options"
	annotationHelmPolicy  = "helm.sh/resource-policy"
	annotationHelmRelease = "meta.helm.sh/release-name"
)

// remove deletes what the session's source rendered before and renders no
// more, as the source's owner would prune it. In a Replace session that
// is every object of the previous render (the ones it left to GitOps
// too), and every object it holds that the render lacks: an object it
// never touched is taken over first (its state and managed fields saved,
// its owners paused in the way that holds for a deleted object, which
// carries no mark), and one its owners would not prune is left, saying
// why. A Version session deletes what it applied before and applies no
// more. The objects applied become the session's inventory.
func (s *Session) remove(ctx context.Context, applied, rendered []cluster.Object) ([]cluster.Change, error) {
	now := refsOf(rendered)
	candidates := slices.Clone(s.rec.Applied)
	if s.o.Mode == Replace {
		candidates = appendNew(candidates, s.rendered...)
		for _, sv := range s.rec.Saved {
			candidates = appendNew(candidates, sv.Ref)
		}
		candidates = appendNew(candidates, s.rec.Created...)
	}
	var (
		stale   []*unstructured.Unstructured
		changes []cluster.Change
		add     Record
		touched []cluster.Ref // owners that gain a deleted object
	)
	for _, ref := range candidates {
		if slices.ContainsFunc(now, func(r cluster.Ref) bool { return sameObject(r, ref) }) {
			continue
		}
		live, err := getRef(ctx, s.c.Kube(), ref)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", ref.Subject(), err)
		}
		if by := live.GetAnnotations()[annotationSession]; by != "" && by != s.o.Name || live.GetDeletionTimestamp() != nil {
			continue
		}
		if s.rec.knows(ref) || s.o.Mode != Replace {
			stale = append(stale, live)
			for i := range s.rec.Owners {
				if s.rec.Owners[i].has(ref) {
					s.rec.Owners[i].Deleted = appendNew(s.rec.Owners[i].Deleted, ref)
					s.rec.Owners[i].Objects = slices.DeleteFunc(s.rec.Owners[i].Objects, is(ref))
					touched = appendNew(touched, s.rec.Owners[i].Ref)
				}
			}
			continue
		}
		// Left to GitOps until now: taken over before it goes.
		owners, err := s.ownerObjects(ctx, live)
		if err != nil {
			return nil, err
		}
		if why := unpruned(live, owners, s.rec, len(rendered) == 0); why != "" {
			changes = append(changes, cluster.Change{Ref: ref, Action: Kept, Reason: why})
			continue
		}
		data, err := json.Marshal(live.Object)
		if err != nil {
			return nil, err
		}
		add.Saved = append(add.Saved, Saved{Ref: ref, Object: data})
		stale = append(stale, live)
		for _, u := range owners {
			or := cluster.RefOf(u)
			touched = appendNew(touched, or)
			if i := s.rec.ownerIndex(or); i >= 0 {
				s.rec.Owners[i].Deleted = appendNew(s.rec.Owners[i].Deleted, ref)
				continue
			}
			if i := slices.IndexFunc(add.Owners, func(o Owner) bool { return sameObject(o.Ref, or) }); i >= 0 {
				add.Owners[i].Deleted = appendNew(add.Owners[i].Deleted, ref)
				continue
			}
			ow, err := s.how(ctx, u, true)
			if err != nil {
				return nil, err
			}
			ow.Deleted = []cluster.Ref{ref}
			add.Owners = append(add.Owners, ow)
		}
	}
	s.rec.Applied = refsOf(applied)
	if s.o.Mode == Replace {
		s.rendered = now
	}
	if len(stale) == 0 {
		return changes, nil
	}
	// An owner paused object by object would bring a deleted object back:
	// only suspending it keeps the object away.
	var paused []Owner
	for i, o := range s.rec.Owners {
		if !slices.ContainsFunc(touched, is(o.Ref)) {
			continue
		}
		if o.How == HowObjects {
			u, err := s.getOwner(ctx, o.Ref)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			ow, err := s.how(ctx, u, true)
			if err != nil {
				return nil, err
			}
			ow.Objects, ow.Deleted, ow.Revision = o.Objects, o.Deleted, o.Revision
			o = ow
			paused = append(paused, o)
		}
		o.Why = deletedWhy(o)
		s.rec.Owners[i] = o
	}
	for _, o := range add.Owners {
		o.Why = deletedWhy(o)
		s.rec.Owners = append(s.rec.Owners, o)
		paused = append(paused, o)
	}
	s.rec.Saved = append(s.rec.Saved, add.Saved...)
	// The record knows every object before it goes, so a restorer brings
	// back what a crash in the middle left deleted.
	if err := s.store.write(ctx, s.rec); err != nil {
		return nil, err
	}
	for _, o := range paused {
		if err := suspend(ctx, s.c.Kube(), o, s.o.Name); err != nil {
			return nil, err
		}
	}
	s.published()
	deleted, err := s.c.Delete(ctx, stale)
	// What the session created and has deleted is not held any more.
	for _, ch := range deleted {
		s.rec.Created = slices.DeleteFunc(s.rec.Created, is(ch.Ref))
	}
	if len(paused) > 0 {
		s.keepDeleted(refsOfLive(stale))
	}
	return append(changes, deleted...), err
}

// settleDeleted is how long objects are kept deleted after their owner
// was paused for them.
var settleDeleted = 10 * time.Second

// keepDeleted deletes again, for a while after their owners were paused,
// the objects the session deleted that a reconcile already under way
// brings back: kustomize-controller reads spec.suspend when a reconcile
// starts (Argo CD its sync policy when a sync does), so one that started
// before the pause still applies the object. It stops early for an
// object the tree renders again (see settle).
func (s *Session) keepDeleted(refs []cluster.Ref) {
	s.settle(func(ctx context.Context) bool {
		for _, ref := range refs {
			if s.rec.saved(ref) == nil || slices.ContainsFunc(s.rendered, is(ref)) {
				continue // handed back, or rendered again
			}
			live, err := getRef(ctx, s.c.Kube(), ref)
			if err != nil || live.GetAnnotations()[annotationSession] != "" || live.GetDeletionTimestamp() != nil {
				continue
			}
			s.c.Delete(ctx, []*unstructured.Unstructured{live})
		}
		return true
	})
}

// settle calls look every 250 ms for settleDeleted, beside the session and
// under its lock, until the first of: the window's end, the session's
// stop, its heartbeat's end (the session is not this process's any more:
// another restored it), look returning false.
func (s *Session) settle(look func(ctx context.Context) bool) {
	go func() {
		deadline := time.Now().Add(settleDeleted)
		for time.Now().Before(deadline) {
			select {
			case <-s.hbDone:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return // woken late (the process was paused): the window is over
			}
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			more := look(ctx)
			cancel()
			s.mu.Unlock()
			if !more {
				return
			}
		}
	}()
}

// deletedWhy says why an owner is suspended for the objects the session
// deleted; other reasons (--pause owner, a HelmRelease, a parent) stand.
func deletedWhy(o Owner) string {
	if len(o.Deleted) == 0 || o.Ref.Kind != fluxKustomization.Kind || o.Why != "" && !strings.HasPrefix(o.Why, "the session deleted ") {
		return o.Why
	}
	names := make([]string, 0, len(o.Deleted))
	for _, r := range o.Deleted {
		names = append(names, r.Subject())
	}
	return fmt.Sprintf("the session deleted %s, which only suspending %s keeps away", strings.Join(names, ", "), o.Ref.Subject())
}

// unpruned says why the owners of a live object would leave it on the
// cluster once their source no longer has it, or "" when they would
// delete it: a Flux Kustomization with prune: false, or an object of it
// marked kustomize.toolkit.fluxcd.io/prune: disabled; an Argo CD
// Application whose automated sync does not prune, or an object of it
// marked Prune=false; a Helm release's object marked
// helm.sh/resource-policy: keep; and every object of an Application whose
// source renders nothing (emptied), when its automated sync does not
// allowEmpty: Argo CD skips a sync that would delete all it has. An owner
// the session paused is judged by its settings from before (rec).
func unpruned(live *unstructured.Unstructured, owners []*unstructured.Unstructured, rec *Record, emptied bool) string {
	a := live.GetAnnotations()
	for _, u := range owners {
		ref := cluster.RefOf(u)
		switch u.GetKind() {
		case fluxKustomization.Kind:
			if a[annotationFluxPrune] == "disabled" {
				return fmt.Sprintf("marked %s: disabled, which %s does not prune", annotationFluxPrune, ref.Subject())
			}
			if prune, found, _ := unstructured.NestedBool(u.Object, "spec", "prune"); found && !prune {
				return fmt.Sprintf("%s has prune: false", ref.Subject())
			}
		case argoApplication.Kind:
			for _, opt := range strings.Split(a[annotationArgoSync], ",") {
				if strings.TrimSpace(opt) == "Prune=false" {
					return fmt.Sprintf("marked %s: Prune=false, which %s does not prune", annotationArgoSync, ref.Subject())
				}
			}
			automated := argoAutomated(u, rec)
			if automated["prune"] != true {
				return fmt.Sprintf("%s syncs without pruning (spec.syncPolicy.automated.prune is not true): Argo CD would show it OutOfSync, requiring pruning", ref.Subject())
			}
			if emptied && automated["allowEmpty"] != true {
				return fmt.Sprintf("%s would sync away every object it has, which its automated sync skips (spec.syncPolicy.automated.allowEmpty is not true)", ref.Subject())
			}
		case fluxHelmRelease.Kind:
			if a[annotationHelmPolicy] == "keep" {
				return fmt.Sprintf("marked %s: keep, which Helm does not delete (%s)", annotationHelmPolicy, ref.Subject())
			}
		}
	}
	if a[annotationHelmPolicy] == "keep" && a[annotationHelmRelease] != "" {
		return fmt.Sprintf("marked %s: keep, which Helm does not delete (release %s)", annotationHelmPolicy, a[annotationHelmRelease])
	}
	return ""
}

// argoAutomated is an Application's automated sync policy (nil: none),
// which alone prunes what its source no longer has, unasked (with prune:
// true). A session that turned the automated sync off judges by what it
// was.
func argoAutomated(app *unstructured.Unstructured, rec *Record) map[string]any {
	automated, _, _ := unstructured.NestedFieldNoCopy(app.Object, "spec", "syncPolicy", "automated")
	if i := rec.ownerIndex(cluster.RefOf(app)); i >= 0 && rec.Owners[i].How == HowAutoSyncOff {
		automated = nil
		if err := json.Unmarshal(priorSetting(app, rec.Owners[i]), &automated); err != nil {
			automated = nil
		}
	}
	m, _ := automated.(map[string]any)
	return m
}

// priorSetting is an owner's paused setting as it was before any session:
// from the owner's bookkeeping, else the record's.
func priorSetting(u *unstructured.Unstructured, o Owner) json.RawMessage {
	if p := u.GetAnnotations()[annotationPrior]; p != "" {
		return json.RawMessage(p)
	}
	return o.Prior
}

// has reports whether the owner's objects the session holds include ref.
func (o Owner) has(ref cluster.Ref) bool {
	return slices.ContainsFunc(o.Objects, is(ref)) || slices.ContainsFunc(o.Deleted, is(ref))
}

func is(ref cluster.Ref) func(cluster.Ref) bool {
	return func(c cluster.Ref) bool { return sameObject(c, ref) }
}

func refsOfLive(objs []*unstructured.Unstructured) []cluster.Ref {
	out := make([]cluster.Ref, 0, len(objs))
	for _, u := range objs {
		out = append(out, cluster.RefOf(u))
	}
	return out
}

func refsOf(objs []cluster.Object) []cluster.Ref {
	out := make([]cluster.Ref, 0, len(objs))
	for _, o := range objs {
		out = append(out, cluster.RefOf(o.Unstructured))
	}
	return out
}
