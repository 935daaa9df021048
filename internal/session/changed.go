package session

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sluice.dev/sluice/internal/cluster"
)

// HandedBack is the action of an object the session held and gave back
// to its owner, the working tree rendering it as it was before the
// session.
const HandedBack cluster.Action = "handed back"

// split divides a Replace session's render into what it applies and what
// it leaves to GitOps. An object the session does not hold is left alone
// when a server-side dry run shows it live as rendered (as its applier,
// kustomize-controller say, would apply it, so that a field the render
// leaves out counts as a change): not applied, not
// marked, not recorded, so git's later changes reach it as usual; once
// left alone it is looked at again only when its render changes, so that
// git changing it on the cluster is not taken for the developer's
// change. An object the session holds is handed back when the working
// tree renders it as it was before the session.
func (s *Session) split(ctx context.Context, objs []cluster.Object) (apply []cluster.Object, left []cluster.Change, back []cluster.Ref, err error) {
	if s.untouched == nil {
		s.untouched = map[string]string{}
	}
	var ask []cluster.Object
	sums := make(map[string]string, len(objs))
	for _, o := range objs {
		ref := cluster.RefOf(o.Unstructured)
		k := ref.Key()
		sums[k] = renderSum(o.Unstructured)
		saved := s.rec.saved(ref)
		switch {
		case s.rec.created(ref):
			apply = append(apply, o)
		case saved != nil:
			if within(o.Unstructured, saved.Object) {
				back = append(back, ref)
				left = append(left, cluster.Change{Ref: ref, Action: HandedBack, Origin: o.Origin})
				continue
			}
			apply = append(apply, o)
		case s.untouched[k] == sums[k]:
			left = append(left, cluster.Change{Ref: ref, Action: cluster.Unchanged, Origin: o.Origin})
		default:
			ask = append(ask, o)
		}
	}
	if len(ask) > 0 {
		res, err := s.c.Diff(ctx, ask, cluster.DiffOptions{Namespace: s.o.Namespace, AsApplier: true})
		if err != nil {
			return nil, nil, nil, err
		}
		same := map[string]bool{}
		for _, ch := range res.Changes {
			if ch.Action == cluster.Unchanged {
				same[ch.Ref.Key()] = true
			}
		}
		for _, o := range ask {
			ref := cluster.RefOf(o.Unstructured)
			if same[ref.Key()] {
				left = append(left, cluster.Change{Ref: ref, Action: cluster.Unchanged, Origin: o.Origin})
				continue
			}
			apply = append(apply, o)
		}
	}
	// What is left alone or handed back now is remembered as rendered:
	// until the developer changes its render, git moving it on the
	// cluster (the owner reconciling what it got back) is git's business.
	s.untouched = map[string]string{}
	for _, ch := range left {
		s.untouched[ch.Ref.Key()] = sums[ch.Ref.Key()]
	}
	return apply, left, back, nil
}

// handBack gives held objects back to their owners during the session:
// each is put back as it was before (recreated, where the session had
// deleted it; its managed fields too, so the owner's controller owns its
// fields again, and without the session's marks), the owners left with
// nothing of the session's are resumed, and the record forgets them.
func (s *Session) handBack(ctx context.Context, refs []cluster.Ref) error {
	if len(refs) == 0 {
		return nil
	}
	other := func(u *unstructured.Unstructured) bool {
		by := u.GetAnnotations()[annotationSession]
		return by != "" && by != s.o.Name
	}
	for _, ref := range refs {
		sv := s.rec.saved(ref)
		if _, err := restoreObject(ctx, s.c.Kube(), *sv, other); err != nil {
			return fmt.Errorf("handing back %s: %w", ref.Subject(), err)
		}
		s.rec.Saved = slices.DeleteFunc(s.rec.Saved, func(v Saved) bool { return sameObject(v.Ref, ref) })
		s.rec.Applied = slices.DeleteFunc(s.rec.Applied, is(ref))
		for i := range s.rec.Owners {
			s.rec.Owners[i].Objects = slices.DeleteFunc(s.rec.Owners[i].Objects, is(ref))
			s.rec.Owners[i].Deleted = slices.DeleteFunc(s.rec.Owners[i].Deleted, is(ref))
		}
	}
	return s.release(ctx, true, refs)
}

// release hands back the owners the session no longer needs paused: every
// owner once it holds nothing; a Flux Kustomization paused object by
// object once none of its objects is held; and one suspended for the
// objects the session deleted once none is deleted any more, which goes
// back to being paused object by object (its held objects carry the mark)
// or, holding none, is resumed. A Kustomization still suspended for
// deleted objects names those still deleted. The record is written when
// an owner was handed back, or when write says it must be. restored are
// the objects just put back (resume).
func (s *Session) release(ctx context.Context, write bool, restored []cluster.Ref) error {
	holdsNothing := len(s.rec.Saved) == 0 && len(s.rec.Created) == 0
	var keep []Owner
	for _, o := range s.rec.Owners {
		narrow := o.Ref.Kind == fluxKustomization.Kind && s.o.Pause == PauseObject && len(o.Deleted) == 0
		switch {
		case holdsNothing, narrow && len(o.Objects) == 0:
			if err := resume(ctx, s.c.Kube(), o, s.o.Name, restored); err != nil {
				return err
			}
			write = true
			continue
		case narrow && o.How == HowSuspend:
			// Suspended only for what was deleted: its marked objects hold
			// the pause from now on.
			if err := resume(ctx, s.c.Kube(), o, s.o.Name, restored); err != nil {
				return err
			}
			o.How, o.Why, o.Prior, o.Parent = HowObjects, "", nil, nil
			write = true
		}
		o.Why = deletedWhy(o)
		keep = append(keep, o)
	}
	s.rec.Owners = keep
	if !write {
		return nil
	}
	if err := s.store.write(ctx, s.rec); err != nil {
		return err
	}
	s.published()
	return nil
}

// within reports whether every field the render sets holds the same
// value in the saved state (what the owner had applied): lists compare
// element by element, the saved state may hold more (defaults, fields
// other tools set).
func within(rendered *unstructured.Unstructured, saved json.RawMessage) bool {
	var have map[string]any
	if json.Unmarshal(saved, &have) != nil {
		return false
	}
	want := rendered.DeepCopy().Object
	// Sluice's digest of the render is its own bookkeeping.
	unstructured.RemoveNestedField(want, "metadata", "annotations", cluster.AnnotationApplied)
	return cluster.Subset(setOnly(want), have)
}

// setOnly is what a render sets: without nulls (creationTimestamp: null)
// and the maps left empty.
func setOnly(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			e = setOnly(e)
			if m, ok := e.(map[string]any); e == nil || ok && len(m) == 0 {
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = setOnly(e)
		}
		return out
	}
	return v
}

// renderSum identifies an object as rendered.
func renderSum(u *unstructured.Unstructured) string {
	data, _ := json.Marshal(u.Object)
	sum := sha256.Sum256(data)
	return string(sum[:])
}

// gitRevision is the revision of git an owner's controller would apply
// now: a Flux Kustomization's source's artifact (it moves while the
// Kustomization is suspended too), a HelmRelease's chart's artifact, an
// Argo CD Application's compared revision. "" when there is none to read.
func gitRevision(ctx context.Context, s *Session, owner *unstructured.Unstructured) string {
	switch owner.GetKind() {
	case fluxKustomization.Kind:
		kind, _, _ := unstructured.NestedString(owner.Object, "spec", "sourceRef", "kind")
		name, _, _ := unstructured.NestedString(owner.Object, "spec", "sourceRef", "name")
		ns, _, _ := unstructured.NestedString(owner.Object, "spec", "sourceRef", "namespace")
		if ns == "" {
			ns = owner.GetNamespace()
		}
		if kind == "" || name == "" {
			return ""
		}
		src, err := getRef(ctx, s.c.Kube(), cluster.Ref{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: kind, Namespace: ns, Name: name})
		if err != nil {
			return ""
		}
		rev, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
		return rev
	case fluxHelmRelease.Kind:
		// The HelmChart source-controller makes of the chart: its artifact
		// (0.1.0+<commit> for a chart in git) moves with the source.
		chart, _, _ := unstructured.NestedString(owner.Object, "status", "helmChart")
		ns, name, ok := strings.Cut(chart, "/")
		if !ok {
			return ""
		}
		src, err := getRef(ctx, s.c.Kube(), cluster.Ref{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "HelmChart", Namespace: ns, Name: name})
		if err != nil {
			return ""
		}
		rev, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
		return rev
	case argoApplication.Kind:
		rev, _, _ := unstructured.NestedString(owner.Object, "status", "sync", "revision")
		if rev == "" {
			revs, _, _ := unstructured.NestedStringSlice(owner.Object, "status", "sync", "revisions")
			if len(revs) > 0 {
				rev = revs[0]
			}
		}
		return rev
	}
	return ""
}

// checkRevision says, once per new revision, when git moved for an owner
// (u, as it is now) whose objects the session holds: those objects keep
// the developer's copy, and git's changes to them wait.
func (s *Session) checkRevision(ctx context.Context, o Owner, u *unstructured.Unstructured) {
	if o.Revision == "" {
		return
	}
	rev := gitRevision(ctx, s, u)
	if rev == "" || rev == o.Revision || s.announced[o.Ref.String()+"@"+rev] {
		return
	}
	if s.announced == nil {
		s.announced = map[string]bool{}
	}
	s.announced[o.Ref.String()+"@"+rev] = true
	held := o.Objects
	if p := s.held.Load(); o.How != HowObjects && p != nil {
		held = append(slices.Clone(held), *p...)
	}
	names := make([]string, 0, len(held))
	for _, r := range held {
		names = append(names, r.String())
	}
	msg := fmt.Sprintf("git moved: %s now deploys %s (the session started at %s); the session holds %s, so git's changes to %s wait: your tree may be behind (git pull), and stopping the session hands %s back",
		o.Ref.Subject(), rev, o.Revision, joinNames(names), them(len(names)), them(len(names)))
	s.notice(msg)
}

func joinNames(names []string) string {
	if len(names) == 0 {
		return "objects of it"
	}
	return strings.Join(names, ", ")
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
