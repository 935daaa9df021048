package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/internal/cluster"
)

// annotationSession marks the objects a session applied with its name:
// how another session sees that they are taken.
const annotationSession = "sluice.dev/session"

// Options configure a session.
type Options struct {
	// Name names the session on the cluster: a DNS label.
	Name string `json:"name"`
	// Mode is Replace (the default) or Version.
	Mode Mode `json:"mode,omitempty"`
	// Namespace is given to namespaced objects that have none; the default
	// is the client's.
	Namespace string `json:"namespace,omitempty"`
	// AllowClusterScoped lets a Version session apply cluster-scoped
	// objects, which every version shares.
	AllowClusterScoped bool `json:"allowClusterScoped,omitempty"`
	// Steal takes objects another session holds instead of refusing.
	Steal bool `json:"steal,omitempty"`
	// Handoff makes Stop keep the objects for GitOps to adopt instead of
	// restoring; it refuses a workload a GitOps tool owns.
	Handoff bool `json:"handoff,omitempty"`
	// Pause is how much of GitOps the session pauses: PauseObject (the
	// default, the narrowest that holds) or PauseOwner.
	Pause Pause `json:"pause,omitempty"`
	// Path, Repo and Ref describe the source, for the record.
	Path string `json:"path,omitempty"`
	Repo string `json:"repo,omitempty"`
	Ref  string `json:"ref,omitempty"`
	// Holder is user@host; the default is this process's.
	Holder string `json:"holder,omitempty"`
	// LeaseDuration is how long a session without heartbeat stays active;
	// the default is 15 seconds.
	LeaseDuration time.Duration `json:"leaseDuration,omitempty"`
	// RenewInterval is the heartbeat's period, and how soon a stop asked
	// from elsewhere is seen; the default is 2 seconds.
	RenewInterval time.Duration `json:"renewInterval,omitempty"`
}

func (o *Options) defaults(c *cluster.Client) {
	if o.Mode == "" {
		o.Mode = Replace
	}
	if o.Pause == "" {
		o.Pause = PauseObject
	}
	if o.Namespace == "" {
		o.Namespace = c.Namespace
	}
	if o.Holder == "" {
		o.Holder = DefaultHolder()
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewInterval <= 0 {
		o.RenewInterval = 2 * time.Second
	}
}

// DefaultHolder is user@host of this process.
func DefaultHolder() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// ValidateName checks a session name: a DNS label short enough to suffix
// a namespace name.
func ValidateName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("session name %q: %s", name, strings.Join(msgs, "; "))
	}
	if len(name) > 40 {
		return fmt.Errorf("session name %q: at most 40 characters", name)
	}
	return nil
}

// Session is a live session, held by this process.
type Session struct {
	c        *cluster.Client
	o        Options
	identity string
	store    *store
	lease    *lease

	mu  sync.Mutex // held by Apply and Stop
	rec *Record
	// untouched are the objects the last apply left to GitOps, by what
	// the render made of them.
	untouched map[string]string
	// stopped says Stop has begun: nothing runs beside it any more.
	stopped bool
	// applies counts the Applies: an Apply's settling window ends at the
	// next, which applies the tree anew.
	applies int
	// rendered are the objects of the last render applied (a Replace
	// session's, those left to GitOps included): what a render that
	// lacks one of them removes.
	rendered []cluster.Ref
	// notices are what the heartbeat has to say (git moved for a held
	// object); announced the revisions said.
	notices   chan string
	announced map[string]bool

	summaryMu sync.Mutex
	summary   map[string]string

	stopOnce  sync.Once
	stopBy    chan string
	stopAsked atomic.Bool
	// pauses is what the heartbeat checks still holds: the record's
	// owners as last written.
	pauses atomic.Pointer[[]Owner]
	// changing counts the starts and ends of Applies, which pause and
	// resume owners: a heartbeat checks pauses only between two, and
	// reports nothing if one started while it read (it could see an
	// owner resumed by the session itself before the session published
	// that it no longer holds it).
	changing atomic.Int64
	// held is what the record had saved as last published: the objects
	// the session holds, for the heartbeat (which must not wait for mu).
	held         atomic.Pointer[[]cluster.Ref]
	revertedOnce sync.Once
	reverted     chan string
	lastCheck    time.Time
	lostOnce     sync.Once
	lost         chan error
	hbCancel     context.CancelFunc
	hbDone       chan struct{}
}

// Start registers a new session on the cluster: its Lease (refused when a
// session of that name exists) and an empty record, and starts its
// heartbeat. Nothing else is touched until Apply.
func Start(ctx context.Context, c *cluster.Client, o Options) (*Session, error) {
	o.defaults(c)
	if err := ValidateName(o.Name); err != nil {
		return nil, err
	}
	if o.Mode != Replace && o.Mode != Version {
		return nil, fmt.Errorf("mode %q: must be replace or version", o.Mode)
	}
	if o.Pause != PauseObject && o.Pause != PauseOwner {
		return nil, fmt.Errorf("pause %q: must be object or owner", o.Pause)
	}
	if err := ensureSystemNamespace(ctx, c.Kube()); err != nil {
		return nil, err
	}
	s := &Session{
		c: c, o: o, identity: fmt.Sprintf("%s pid %d", o.Holder, os.Getpid()),
		store:  &store{c: c.Kube(), name: o.Name},
		stopBy: make(chan string, 1), lost: make(chan error, 1), reverted: make(chan string, 1), notices: make(chan string, 16),
		rec: &Record{Name: o.Name, Holder: o.Holder, PID: os.Getpid(), Started: time.Now().UTC().Truncate(time.Second),
			Mode: o.Mode, Path: o.Path, Repo: o.Repo, Ref: o.Ref},
	}
	s.summary = map[string]string{
		annotationPath: o.Path, annotationMode: string(o.Mode), annotationState: StateActive,
		annotationStarted: s.rec.Started.Format(time.RFC3339),
	}
	l, err := acquireLease(ctx, c.Kube(), o.Name, s.identity, o.LeaseDuration, s.summary)
	if err != nil {
		return nil, err
	}
	s.lease = l
	if err := s.store.write(ctx, s.rec); err != nil {
		l.release(context.WithoutCancel(ctx))
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.hbCancel, s.hbDone = cancel, make(chan struct{})
	go s.heartbeat(hctx)
	return s, nil
}

func (s *Session) heartbeat(ctx context.Context) {
	defer close(s.hbDone)
	t := time.NewTicker(s.o.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		by, err := s.lease.renew(ctx, s.summaryCopy())
		if errors.Is(err, errLost) {
			s.lostOnce.Do(func() {
				s.lost <- fmt.Errorf("session %s was restored by another process (its heartbeat stopped for longer than %s)", s.o.Name, s.o.LeaseDuration)
			})
			return
		}
		if by != "" {
			s.stopAsked.Store(true)
			s.stopOnce.Do(func() { s.stopBy <- by })
		}
		s.checkPauses(ctx)
	}
}

// checkPauses verifies that every pause still holds (a parent applying git,
// an ApplicationSet or a person may put an owner's setting back); the
// first that does not is delivered by Reverted. It also says when git
// moved for an owner (checkRevision), from the same read of it.
func (s *Session) checkPauses(ctx context.Context) {
	epoch := s.changing.Load()
	if epoch%2 == 1 {
		return // an Apply is pausing or resuming owners: the next heartbeat looks
	}
	owners := s.pauses.Load()
	if owners == nil {
		return
	}
	for _, o := range *owners {
		u, err := getRef(ctx, s.c.Kube(), o.Ref)
		if err != nil {
			continue // gone, or unreadable now: the next heartbeat looks again
		}
		s.checkRevision(ctx, o, u)
		why, err := held(ctx, s, o, u)
		if err != nil || why == "" {
			continue
		}
		if s.changing.Load() != epoch {
			return // the session itself changed its owners meanwhile
		}
		s.revertedOnce.Do(func() { s.reverted <- why })
		return
	}
}

// Notices delivers what the session has to tell while it runs: git
// moved for an owner whose objects it holds.
func (s *Session) Notices() <-chan string { return s.notices }

// Reverted delivers why a pause stopped holding: the session should stop
// applying rather than fight the controller that took the owner back.
func (s *Session) Reverted() <-chan string { return s.reverted }

// published makes the record's owners what the heartbeat checks and
// `sluice run list` shows.
func (s *Session) published() {
	owners := slices.Clone(s.rec.Owners)
	s.pauses.Store(&owners)
	held := make([]cluster.Ref, 0, len(s.rec.Saved))
	for _, sv := range s.rec.Saved {
		held = append(held, sv.Ref)
	}
	s.held.Store(&held)
	var lines []string
	for _, o := range owners {
		lines = append(lines, o.Paused())
	}
	s.setSummary(annotationPaused, strings.Join(lines, "\n"))
}

func (s *Session) summaryCopy() map[string]string {
	s.summaryMu.Lock()
	defer s.summaryMu.Unlock()
	out := make(map[string]string, len(s.summary))
	for k, v := range s.summary {
		out[k] = v
	}
	return out
}

func (s *Session) setSummary(k, v string) {
	s.summaryMu.Lock()
	defer s.summaryMu.Unlock()
	s.summary[k] = v
}

// Name is the session's name.
func (s *Session) Name() string { return s.o.Name }

// StopRequested delivers who asked, from another terminal, that the
// session stop (`sluice run stop`).
func (s *Session) StopRequested() <-chan string { return s.stopBy }

// Lost delivers an error if another process took the session over.
func (s *Session) Lost() <-chan error { return s.lost }

// SetSource records the branch and commit the working tree is on.
func (s *Session) SetSource(branch, commit string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Branch, s.rec.Commit = branch, commit
	s.setSummary(annotationBranch, branch)
}

// Baseline gives a Replace session's first render what to compare with
// for removals: what the owner of its folder applied (its tool's
// inventory), so that an object the tree already lacks when the session
// starts is removed, as the owner would prune it were the tree committed.
func (s *Session) Baseline(refs []cluster.Ref) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.o.Mode == Replace && s.rendered == nil {
		s.rendered = refs
	}
}

// Record returns a copy of the session's record.
func (s *Session) Record() Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, _ := json.Marshal(s.rec)
	var r Record
	json.Unmarshal(data, &r)
	return r
}

// ConflictError says objects are held by other sessions.
type ConflictError struct{ Msgs []string }

func (e *ConflictError) Error() string { return strings.Join(e.Msgs, "\n") }

// Apply applies one render of the session's source: the objects it has
// not touched before are recorded first (created, or their prior state
// saved, their owners' settings kept and the owners suspended), then the
// set is applied, and what the previous apply had and this one has not is
// deleted. An error leaves the record accounting for everything touched.
func (s *Session) Apply(ctx context.Context, objs []cluster.Object, ao cluster.ApplyOptions) (*cluster.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Owners paused and resumed meanwhile: no heartbeat's check made
	// across it counts (changing is odd while an Apply runs).
	s.changing.Add(1)
	defer s.changing.Add(1)
	objs, err := s.c.Resolve(objs, s.o.Namespace)
	if err != nil {
		return nil, err
	}
	if objs, err = s.place(objs); err != nil {
		return nil, err
	}
	rendered := objs
	var left []cluster.Change
	if s.o.Mode == Replace {
		var back []cluster.Ref
		if objs, left, back, err = s.split(ctx, objs); err != nil {
			return nil, err
		}
		if err := s.handBack(ctx, back); err != nil {
			return nil, err
		}
	}
	s.applies++
	taken, err := s.account(ctx, objs)
	if err != nil {
		return nil, err
	}
	s.reapplied(objs)
	for _, o := range objs {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[annotationSession] = s.o.Name
		if s.rec.marked(cluster.RefOf(o.Unstructured)) {
			a[annotationFluxDisabled] = fluxDisabled
		}
		o.SetAnnotations(a)
	}
	ao.Namespace = s.o.Namespace
	ao.Inventory, ao.Prune = nil, false
	ao.TakeOver = s.o.Mode == Replace
	res := &cluster.Result{}
	if len(objs) > 0 {
		if res, err = s.c.Apply(ctx, objs, ao); err != nil {
			return res, err
		}
		if held := only(objs, taken); len(held) > 0 {
			s.keepApplied(held, ao)
		}
	}
	res.Changes = append(res.Changes, left...)
	removed, err := s.remove(ctx, objs, rendered)
	res.Changes = append(res.Changes, removed...)
	if err != nil {
		return res, err
	}
	return res, s.release(ctx, false, nil)
}

// reapplied makes the objects a Flux Kustomization's pause counts as
// deleted, which the render has again, marked ones: applied with the
// mark, they no longer need the Kustomization suspended.
func (s *Session) reapplied(objs []cluster.Object) {
	for _, o := range objs {
		ref := cluster.RefOf(o.Unstructured)
		for i, ow := range s.rec.Owners {
			if ow.Ref.Kind == fluxKustomization.Kind && slices.ContainsFunc(ow.Deleted, is(ref)) {
				s.rec.Owners[i].Deleted = slices.DeleteFunc(ow.Deleted, is(ref))
				s.rec.Owners[i].Objects = appendNew(ow.Objects, ref)
			}
		}
	}
}

// place moves a Version session's objects into its own namespaces
// (NAMESPACE-SESSION), creating them; cluster-scoped objects other than
// those namespaces are refused unless allowed.
func (s *Session) place(objs []cluster.Object) ([]cluster.Object, error) {
	if s.o.Mode != Version {
		return objs, nil
	}
	suffix := "-" + s.o.Name
	var errs []error
	have, want := map[string]bool{}, map[string]bool{}
	rename := func(ns string) string {
		n := ns + suffix
		if len(n) > 63 {
			errs = append(errs, fmt.Errorf("namespace %s: the version namespace %s is longer than 63 characters: choose a shorter --session name", ns, n))
		}
		return n
	}
	for _, o := range objs {
		switch {
		case o.GetNamespace() != "":
			o.SetNamespace(rename(o.GetNamespace()))
			want[o.GetNamespace()] = true
		case o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "":
			o.SetName(rename(o.GetName()))
			have[o.GetName()] = true
		case !s.o.AllowClusterScoped:
			errs = append(errs, fmt.Errorf("%s (%s): cluster-scoped, so shared by every version of the workload: --mode version leaves such objects to the existing workload unless --allow-cluster-scoped", cluster.RefOf(o.Unstructured).Subject(), o.Origin))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	namespaces := make([]string, 0, len(want))
	for ns := range want {
		if !have[ns] {
			namespaces = append(namespaces, ns)
		}
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		objs = append(objs, cluster.Object{Unstructured: u, Origin: "the version namespace of session " + s.o.Name})
	}
	return objs, nil
}

// account records the objects the session has not touched before: which
// it will create, and the prior state of those it will change, with their
// owners. Objects another live session holds are refused (unless Steal).
// The record is written, and the owners suspended, before Apply touches
// anything; a refusal changes nothing, not even the record. It returns
// the objects it took from their owners now.
func (s *Session) account(ctx context.Context, objs []cluster.Object) ([]cluster.Ref, error) {
	var fresh []cluster.Object
	for _, o := range objs {
		if !s.rec.knows(cluster.RefOf(o.Unstructured)) {
			fresh = append(fresh, o)
		}
	}
	var add Record
	if len(fresh) > 0 {
		var err error
		if add, err = s.inspect(ctx, fresh); err != nil {
			return nil, err
		}
	}
	namespaces := len(s.rec.Namespaces)
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && !slices.Contains(s.rec.Namespaces, ns) {
			s.rec.Namespaces = append(s.rec.Namespaces, ns)
		}
	}
	sort.Strings(s.rec.Namespaces)
	if len(fresh) == 0 && namespaces == len(s.rec.Namespaces) {
		return nil, nil
	}
	s.rec.Created = append(s.rec.Created, add.Created...)
	s.rec.Saved = append(s.rec.Saved, add.Saved...)
	var paused []Owner
	for _, o := range add.Owners {
		if i := s.rec.ownerIndex(o.Ref); i >= 0 {
			s.rec.Owners[i].Objects = appendNew(s.rec.Owners[i].Objects, o.Objects...)
			continue
		}
		s.rec.Owners = append(s.rec.Owners, o)
		paused = append(paused, o)
	}
	if err := s.store.write(ctx, s.rec); err != nil {
		return nil, err
	}
	for _, o := range paused {
		if err := suspend(ctx, s.c.Kube(), o, s.o.Name); err != nil {
			return nil, err
		}
	}
	s.published()
	// The objects taken from an owner now: what a reconcile of it under
	// way may still put back.
	var taken []cluster.Ref
	if len(add.Owners) > 0 {
		for _, sv := range add.Saved {
			taken = append(taken, sv.Ref)
		}
	}
	return taken, nil
}

// notice tells the session's user something between iterations, if they
// are listening.
func (s *Session) notice(msg string) {
	select {
	case s.notices <- msg:
	default:
	}
}

func refNames(objs []cluster.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, cluster.RefOf(o.Unstructured).Subject())
	}
	return out
}

// only are the objects of refs.
func only(objs []cluster.Object, refs []cluster.Ref) []cluster.Object {
	var out []cluster.Object
	for _, o := range objs {
		if slices.ContainsFunc(refs, is(cluster.RefOf(o.Unstructured))) {
			out = append(out, o)
		}
	}
	return out
}

// keepApplied applies again, for a while after their owners were paused,
// the session's objects that a reconcile already under way puts back as
// git has them: kustomize-controller reads spec.suspend (and an object's
// mark) when a reconcile starts, Argo CD its sync policy and
// skip-reconcile when a reconcile does, so one that started before the
// pause still applies git's version over the session's. It stops early at
// the next Apply, which applies the tree anew (see settle). An object is
// applied again only when it changed since the session last applied it.
// The caller holds s.mu.
func (s *Session) keepApplied(objs []cluster.Object, ao cluster.ApplyOptions) {
	gen := s.applies
	seen := map[cluster.Ref]string{} // object → resourceVersion after the session's apply
	first := true
	s.settle(func(ctx context.Context) bool {
		if s.applies != gen {
			return false
		}
		var again []cluster.Object
		for _, o := range objs {
			ref := cluster.RefOf(o.Unstructured)
			live, err := getRef(ctx, s.c.Kube(), ref)
			if err != nil || live.GetDeletionTimestamp() != nil {
				continue
			}
			// The first look applies every object once more (a reconcile
			// may have landed before it); later ones those that changed
			// since.
			if first || seen[ref] != live.GetResourceVersion() {
				again = append(again, o)
			}
			seen[ref] = live.GetResourceVersion()
		}
		first = false
		if len(again) == 0 {
			return true
		}
		res, err := s.c.Apply(ctx, again, ao)
		var back []string
		if res != nil {
			for _, ch := range res.Changes {
				if ch.Action == cluster.Configured || ch.Action == cluster.Created {
					back = append(back, ch.Ref.Subject())
				}
			}
		}
		switch {
		case err != nil:
			s.notice(fmt.Sprintf("applying %s again failed (a reconcile under way when its owner was paused may have put it back as git has it; save again to apply): %v", joinNames(refNames(again)), err))
		case len(back) > 0:
			s.notice(fmt.Sprintf("applied %s again: a reconcile already under way when the session paused its owner had put it back as git has it", joinNames(back)))
		}
		for _, o := range again {
			ref := cluster.RefOf(o.Unstructured)
			if live, err := getRef(ctx, s.c.Kube(), ref); err == nil {
				seen[ref] = live.GetResourceVersion()
			}
		}
		return true
	})
}

// appendNew appends the refs not there already.
func appendNew(to []cluster.Ref, refs ...cluster.Ref) []cluster.Ref {
	for _, r := range refs {
		if !slices.ContainsFunc(to, func(c cluster.Ref) bool { return sameObject(c, r) }) {
			to = append(to, r)
		}
	}
	return to
}

// inspect reads the objects the session has not touched yet and works out
// what the record gains: the ones to create, the prior state of the
// others, the owners to suspend (with their prior settings). Objects
// another session holds are conflicts, unless stolen.
func (s *Session) inspect(ctx context.Context, fresh []cluster.Object) (Record, error) {
	var add Record
	lives, err := s.getAll(ctx, fresh)
	if err != nil {
		return add, err
	}
	var conflicts []string
	known := func(ref cluster.Ref) bool {
		return s.rec.owner(ref) || slices.ContainsFunc(add.Owners, func(n Owner) bool { return sameObject(n.Ref, ref) })
	}
	// mark adds an object to the marked ones of a Kustomization (an entry
	// for a known owner is merged by account).
	mark := func(owner, obj cluster.Ref) {
		if owner.Kind != fluxKustomization.Kind {
			return
		}
		if i := slices.IndexFunc(add.Owners, func(n Owner) bool { return sameObject(n.Ref, owner) }); i >= 0 {
			add.Owners[i].Objects = appendNew(add.Owners[i].Objects, obj)
			return
		}
		if i := s.rec.ownerIndex(owner); i >= 0 {
			add.Owners = append(add.Owners, Owner{Ref: s.rec.Owners[i].Ref, How: s.rec.Owners[i].How, Objects: []cluster.Ref{obj}})
		}
	}
	for i, o := range fresh {
		ref, live := cluster.RefOf(o.Unstructured), lives[i]
		switch {
		case live == nil:
			add.Created = append(add.Created, ref)
			continue
		case live.GetDeletionTimestamp() != nil:
			return add, fmt.Errorf("%s (%s) is being deleted: wait until it is gone", ref.Subject(), o.Origin)
		}
		if by := live.GetAnnotations()[annotationSession]; by != "" && by != s.o.Name {
			taken, msg, err := s.take(ctx, by, ref, o.Origin)
			if err != nil {
				return add, err
			}
			if taken == nil {
				conflicts = append(conflicts, msg)
				continue
			}
			add.Created = append(add.Created, taken.Created...)
			add.Saved = append(add.Saved, taken.Saved...)
			for _, ow := range taken.Owners {
				if !known(ow.Ref) {
					add.Owners = append(add.Owners, ow)
				}
			}
			continue
		}
		data, err := json.Marshal(live.Object)
		if err != nil {
			return add, err
		}
		add.Saved = append(add.Saved, Saved{Ref: ref, Object: data})
		if s.o.Mode != Replace && !s.o.Handoff {
			continue
		}
		owners, err := s.owners(ctx, live)
		if err != nil {
			return add, err
		}
		for _, or := range owners {
			if s.o.Handoff {
				return add, fmt.Errorf("%s is managed by %s: --handoff is for a workload no GitOps tool manages", ref.Subject(), or.Subject())
			}
			if known(or) {
				mark(or, ref)
				continue
			}
			u, err := s.getOwner(ctx, or)
			if err != nil {
				return add, err
			}
			ow, err := s.how(ctx, u, false)
			if err != nil {
				return add, err
			}
			if ow.Ref.Kind == fluxKustomization.Kind {
				ow.Objects = []cluster.Ref{ref}
			}
			add.Owners = append(add.Owners, ow)
		}
	}
	if len(conflicts) > 0 {
		return add, &ConflictError{Msgs: conflicts}
	}
	return add, nil
}

// take handles an object another session holds: refused (nil, with why)
// while that session is live or until it is cleaned up, unless Steal,
// which copies the holder's record of the object, so that whichever
// session ends last still puts it back as it was before either.
func (s *Session) take(ctx context.Context, holder string, ref cluster.Ref, origin string) (*Record, string, error) {
	info, err := Get(ctx, s.c, holder)
	state, who := "gone", ""
	if err == nil {
		state, who = info.State, " ("+info.Holder+")"
	}
	if !s.o.Steal {
		hint := "use --steal to take it"
		if state == StateStale {
			hint = "run `sluice run cleanup` to restore that session, or use --steal"
		}
		return nil, fmt.Sprintf("%s (%s) is held by session %s%s, %s: %s", ref.Subject(), origin, holder, who, state, hint), nil
	}
	other := &store{c: s.c.Kube(), name: holder}
	rec, err := other.read(ctx)
	if errors.Is(err, ErrNoRecord) {
		rec = &Record{}
	} else if err != nil {
		return nil, "", fmt.Errorf("stealing %s from session %s: %w", ref.Subject(), holder, err)
	}
	taken := &Record{Owners: rec.Owners}
	switch saved := rec.saved(ref); {
	case saved != nil:
		taken.Saved = []Saved{*saved}
	case rec.created(ref):
		taken.Created = []cluster.Ref{ref}
	default:
		// The holder's record does not know it (it was cleaned up): the
		// object as it is stands for its prior state.
		live, err := getRef(ctx, s.c.Kube(), ref)
		if err != nil {
			return nil, "", err
		}
		data, _ := json.Marshal(live.Object)
		taken.Saved = []Saved{{Ref: ref, Object: data}}
	}
	return taken, "", nil
}

// getAll reads the live objects (nil where absent), in parallel.
func (s *Session) getAll(ctx context.Context, objs []cluster.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, o := range objs {
		g.Go(func() error {
			live, err := getRef(gctx, s.c.Kube(), cluster.RefOf(o.Unstructured))
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return nil // to be created (with its kind, when the set defines it)
			}
			if err != nil {
				return fmt.Errorf("reading %s: %w", cluster.RefOf(o.Unstructured).Subject(), err)
			}
			out[i] = live
			return nil
		})
	}
	return out, g.Wait()
}
