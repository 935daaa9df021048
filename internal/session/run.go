package session

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/owner"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// RunOptions configure Run.
type RunOptions struct {
	// Session names and places the session.
	Session Options
	// Dir is the directory rendered: a kustomization, a Helm chart, plain
	// YAML.
	Dir string
	// Render holds the renderer's settings.
	Render render.Options
	// AsOwner names the GitOps object whose settings Dir is rendered
	// with, as its tool renders it ([Kustomization/]NAMESPACE/NAME);
	// empty finds the Flux Kustomization whose source and path are Dir's
	// repository and path; "none" renders Dir as it is.
	AsOwner string
	// HelmRelease names ("NAMESPACE/NAME") the Flux HelmRelease whose
	// release name and values a chart is rendered with. Empty finds it
	// when Dir is a chart rendered without values files of its own.
	HelmRelease string
	// ReadyTimeout bounds the readiness check after each apply; the
	// default is 5 seconds, negative skips it.
	ReadyTimeout time.Duration
	// Debounce is the quiet time that ends a burst of file events; the
	// default is 25 ms.
	Debounce time.Duration
	// Repo and Ref, when set, run the session on a temporary checkout of
	// that branch (someone's pull request), Dir being a path inside it;
	// Poll fetches the branch again that often. Auth reaches the repo.
	Repo string
	Ref  string
	Poll time.Duration
	Auth source.Auth
	// RestoreTimeout bounds putting the cluster back; the default is 5
	// minutes.
	RestoreTimeout time.Duration
	// OnStart, OnIteration and OnStopping report progress.
	OnStart     func(Started)
	OnIteration func(Iteration)
	OnStopping  func(reason string)
	// OnNotice is told what the session notices between iterations: git
	// moved for an object it holds.
	OnNotice func(string)
}

// Started says how a session was set up.
type Started struct {
	Name      string
	Namespace string
	Mode      Mode
	// HelmRelease is the HelmRelease whose values the chart renders with.
	HelmRelease *cluster.Ref
	// Owner names the GitOps object whose settings the render applies
	// ("Kustomization flux-system/apps"), if any.
	Owner string
	// Watching is the root of the watched tree.
	Watching string
}

// Iteration is one render and apply of the session's source.
type Iteration struct {
	N int `json:"n"`
	// Trigger lists the files whose change started it (none for the
	// first), relative to the working tree's root.
	Trigger []string `json:"trigger,omitempty"`
	// Latency is the time from the first file event to the API server's
	// acknowledgement of the apply.
	Latency time.Duration   `json:"latency"`
	Result  *cluster.Result `json:"result,omitempty"`
	// Ready says the changed objects are all ready (kstatus); NotReady
	// those that were not when the check ended (timed out, or superseded
	// by the next change).
	Ready    bool                `json:"ready"`
	NotReady []cluster.Readiness `json:"notReady,omitempty"`
	Err      error               `json:"-"`
	// Retrying says the error is the API server's absence: the session
	// retries by itself.
	Retrying bool   `json:"retrying,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Commit   string `json:"commit,omitempty"`
	// Paused says what this iteration newly paused, and how: a line per
	// owner (a fallback from the narrowest pause says why).
	Paused []string `json:"paused,omitempty"`
	// AsOwner says which GitOps object's settings the render applied and
	// what they did ("as Kustomization flux-system/apps: targetNamespace
	// shop, 3 substitutions from ConfigMap cluster-vars"): on the first
	// iteration, and when it changes.
	AsOwner string `json:"asOwner,omitempty"`
	// Warnings say where applying a chart's hooks is not what Helm does
	// with them (a line each): on the first iteration, and when they
	// change. Its tests are never applied.
	Warnings []string `json:"warnings,omitempty"`
}

// Outcome is how a session ended.
type Outcome struct {
	Restoration *Restoration
	// Handoff is the Flux configuration that adopts what a handed-over
	// session left.
	Handoff []byte
	Reason  string
}

// Run runs a live session: it starts the session, renders and applies
// Dir, then re-renders and applies on every change of what the render
// read (Dir recursively, and anything outside it the renderer read),
// until ctx ends or someone stops the session from elsewhere; then it puts
// the cluster back. A render or apply error is reported and the session
// keeps watching; one caused by an unreachable API server is retried
// every second.
func Run(ctx context.Context, c *cluster.Client, o RunOptions) (*Outcome, error) {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 5 * time.Second
	}
	if o.Debounce <= 0 {
		o.Debounce = 25 * time.Millisecond
	}
	if o.RestoreTimeout <= 0 {
		o.RestoreTimeout = 5 * time.Minute
	}
	if o.Render.Generate == nil {
		// The values a chart generates are made once for the session: an
		// iteration that changes nothing of a Secret does not give it a
		// new password, as a first `helm install` makes them once.
		key := make([]byte, 32)
		rand.Read(key)
		o.Render.Generate = &render.Generate{Key: key, Now: time.Now()}
	}
	var wt *source.Worktree
	if o.Repo != "" {
		tmp, err := os.MkdirTemp("", "sluice-run-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if wt, err = source.CloneWorktree(ctx, o.Repo, o.Ref, tmp, o.Auth); err != nil {
			return nil, err
		}
		rel := filepath.Clean(o.Dir)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("%s: with --repo, the path is inside the repository", o.Dir)
		}
		o.Dir = filepath.Join(tmp, rel)
		o.Session.Repo, o.Session.Ref = source.Redact(o.Repo), o.Ref
		if o.Session.Path == "" {
			o.Session.Path = rel
		}
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", o.Dir)
	}
	hr, err := chartRelease(ctx, c, dir, &o)
	if err != nil {
		return nil, err
	}
	var own owner.Owner
	byPath := false // found by its path and source: the folder is all it applies
	if hr == nil {
		if own, err = owner.Resolve(ctx, c, dir, o.Repo, o.AsOwner); err != nil {
			return nil, err
		}
		byPath = own != nil && o.AsOwner == ""
		if own == nil && o.AsOwner == "" {
			own = ownerByLabels(ctx, c, dir, o)
		}
	}
	if own != nil {
		o.Render = own.Options(o.Render)
		if o.Session.Namespace == "" {
			o.Session.Namespace = own.TargetNamespace()
		}
	}
	head, _ := source.LocalHead(dir)
	root := head.Root
	if root == "" {
		root = render.LocalRoot(dir)
		if root == filepath.Dir(root) { // outside git: the tree is Dir
			root = dir
		}
	}
	if o.Session.Path == "" {
		o.Session.Path = o.Dir
	}
	s, err := Start(ctx, c, o.Session)
	if err != nil {
		return nil, err
	}
	if byPath {
		// Unreadable, the first render has no baseline: what the tree
		// lacks already then stays until the tree renders it once.
		if refs, err := owner.Applied(ctx, c, own); err == nil {
			s.Baseline(refs)
		}
	}
	w, err := NewWatcher(root, o.Debounce, 10*o.Debounce)
	if err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	defer w.Close()
	if o.OnStart != nil {
		st := Started{Name: s.o.Name, Namespace: s.o.Namespace, Mode: s.o.Mode, Watching: root}
		if hr != nil {
			st.HelmRelease = &hr.Ref
		}
		if own != nil {
			st.Owner = own.Name()
		}
		o.OnStart(st)
	}
	l := &loop{s: s, c: c, o: o, dir: dir, root: root, w: w, wt: wt, own: own}
	reason, err := l.run(ctx)
	if err != nil {
		return nil, err // the session was taken over: nothing of ours to restore
	}
	if o.OnStopping != nil {
		o.OnStopping(reason)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.RestoreTimeout)
	defer cancel()
	out := &Outcome{Reason: reason}
	var manifestErr error
	if o.Session.Handoff {
		h := Handoff{Name: s.o.Name, Namespace: "flux-system", TargetNamespace: s.o.Namespace}
		if head, err := source.LocalHead(dir); err == nil {
			h.URL, h.Branch = head.Remote, head.Branch
			if rel, err := filepath.Rel(head.Root, dir); err == nil {
				h.Path = filepath.ToSlash(rel)
			}
		}
		if wt != nil {
			h.URL, h.Branch = source.Redact(o.Repo), o.Ref
		}
		if out.Handoff, manifestErr = h.Manifests(); manifestErr != nil {
			manifestErr = fmt.Errorf("--handoff: the objects stay, but no Flux configuration could be written for them: %w", manifestErr)
		}
	}
	out.Restoration, err = s.Stop(rctx)
	return out, errors.Join(err, manifestErr)
}

// ownerByLabels finds the Flux Kustomization that applied what dir
// renders (as it is), from the labels it set on the live objects: the
// owner of a tree whose remote does not match its source's URL (a fork,
// a mirror). Nil when there is none, or on any error: the session then
// renders the folder as it is, as before.
func ownerByLabels(ctx context.Context, c *cluster.Client, dir string, o RunOptions) owner.Owner {
	ns := o.Session.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	own, _ := owner.FromLabels(ctx, c, dir, ns, func() ([]*unstructured.Unstructured, error) {
		r, err := deploy.Render(ctx, dir, o.Render)
		if err != nil {
			return nil, err
		}
		objs := make([]*unstructured.Unstructured, len(r.Objects))
		for i, obj := range r.Objects {
			objs[i] = obj.Unstructured
		}
		return objs, nil
	})
	return own
}

// chartRelease points a chart at the values of the Flux HelmRelease that
// deploys it (named, or found), unless values files were given.
func chartRelease(ctx context.Context, c *cluster.Client, dir string, o *RunOptions) (*HelmRelease, error) {
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, nil // not a chart
	}
	for _, k := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, err := os.Stat(filepath.Join(dir, k)); err == nil {
			return nil, nil
		}
	}
	helm := &v1alpha1.HelmRender{}
	if o.Render.Render != nil && o.Render.Render.Helm != nil {
		helm = o.Render.Render.Helm
	}
	if len(helm.ValuesFiles) > 0 && o.HelmRelease == "" {
		return nil, nil // the developer's own values
	}
	var ref *cluster.Ref
	if o.HelmRelease != "" {
		ns, name, ok := strings.Cut(o.HelmRelease, "/")
		if !ok {
			ns, name = c.Namespace, o.HelmRelease
		}
		ref = &cluster.Ref{Namespace: ns, Name: name}
	} else {
		var chart struct{ Name string }
		if err := yaml.Unmarshal(data, &chart); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(o.Dir, "Chart.yaml"), err)
		}
		if ref, err = FindHelmRelease(ctx, c, chart.Name, filepath.Base(dir), o.Session.Namespace); err != nil || ref == nil {
			return nil, err
		}
	}
	hr, err := ReadHelmRelease(ctx, c, *ref)
	if err != nil {
		return nil, err
	}
	values, err := json.Marshal(hr.Values)
	if err != nil {
		return nil, err
	}
	h := *helm
	if h.ReleaseName == "" {
		h.ReleaseName = hr.ReleaseName
	}
	if h.Namespace == "" {
		h.Namespace = hr.Namespace
	}
	if len(hr.Values) > 0 {
		h.Values = &apiextensionsv1.JSON{Raw: values}
	}
	r := v1alpha1.Render{}
	if o.Render.Render != nil {
		r = *o.Render.Render
	}
	r.Helm = &h
	o.Render.Render = &r
	o.Render.PostBuild = hr.metadata
	if o.Session.Namespace == "" {
		o.Session.Namespace = hr.Namespace
	}
	return hr, nil
}

// loop is Run's state between iterations.
type loop struct {
	s    *Session
	c    *cluster.Client
	o    RunOptions
	dir  string
	root string
	w    *Watcher
	wt   *source.Worktree
	n    int
	// inputs are what the last good render read, relative to the
	// render's root (fsys); nil after a failure.
	inputs []v1alpha1.Input
	fsys   *source.DirFS
	// pending is a change seen while checking readiness.
	pending *Change
	// paused are the pauses in effect after the last iteration: one not
	// among them is new, and said.
	paused map[string]bool
	// own is the GitOps object the render applies the settings of, and
	// asOwner what was last said of it.
	own     owner.Owner
	asOwner string
	// warnings are the hook warnings last said.
	warnings string
}

func (l *loop) run(ctx context.Context) (string, error) {
	if err := l.w.Add(l.dir); err != nil {
		return "", err
	}
	defer func() {
		if l.fsys != nil {
			l.fsys.Close()
		}
	}()
	retry := l.iterate(ctx, nil, time.Now())
	var poll <-chan time.Time
	if l.wt != nil && l.o.Poll > 0 {
		t := time.NewTicker(l.o.Poll)
		defer t.Stop()
		poll = t.C
	}
	for {
		var again <-chan time.Time
		if retry {
			again = time.After(time.Second)
		}
		var ch Change
		if l.pending != nil {
			ch, l.pending = *l.pending, nil
			retry = l.changed(ctx, ch)
			continue
		}
		select {
		case <-ctx.Done():
			return "interrupted", nil
		case by := <-l.s.StopRequested():
			return "stop requested by " + by, nil
		case err := <-l.s.Lost():
			return "", err
		case n := <-l.s.Notices():
			if l.o.OnNotice != nil {
				l.o.OnNotice(n)
			}
		case why := <-l.s.Reverted():
			// Someone took the owner back: fighting its controller would
			// flap the cluster, so the session ends.
			return "a pause stopped holding: " + why, nil
		case err := <-l.w.Errors():
			return "", fmt.Errorf("watching %s: %w", l.root, err)
		case ch = <-l.w.Changes():
			retry = l.changed(ctx, ch)
		case <-again:
			retry = l.iterate(ctx, nil, time.Now())
		case <-poll:
			moved, err := l.wt.Refresh(ctx)
			if err != nil {
				l.report(Iteration{N: l.n, Err: err})
			} else if moved {
				retry = l.iterate(ctx, []string{"(new commit " + short(l.wt.Commit) + ")"}, time.Now())
			}
		}
	}
}

// changed handles a burst: nothing to do when none of what the last
// render read changed.
func (l *loop) changed(ctx context.Context, ch Change) bool {
	if l.inputs != nil && source.Unchanged(l.fsys, l.inputs, nil) {
		return false
	}
	return l.iterate(ctx, ch.Paths, ch.First)
}

// iterate renders and applies once, reports it, and says whether to retry
// (the API server was unreachable).
func (l *loop) iterate(ctx context.Context, trigger []string, first time.Time) bool {
	l.n++
	it := Iteration{N: l.n, Trigger: trigger}
	if head, err := source.LocalHead(l.dir); err == nil {
		it.Branch, it.Commit = head.Branch, head.Commit
		l.s.SetSource(head.Branch, head.Commit)
	}
	r, err := deploy.Render(ctx, l.dir, l.o.Render)
	if err != nil {
		l.inputs = nil
		// What failed may be outside what is watched: watch the whole tree
		// until a render succeeds.
		l.w.Add(l.root)
		it.Err = err
		l.report(it)
		return false
	}
	if l.fsys == nil || l.fsys.Path() != r.Root {
		if l.fsys != nil {
			l.fsys.Close()
		}
		if l.fsys, err = source.Dir(r.Root); err != nil {
			it.Err = err
			l.report(it)
			return false
		}
	}
	l.inputs = r.Render.Inputs
	l.watchInputs(r.Root, r.Render.Inputs)
	if l.own != nil {
		said := "as " + l.own.Name()
		if rep := l.own.Last().String(); rep != "" {
			said += ": " + rep
		}
		if said != l.asOwner {
			it.AsOwner, l.asOwner = said, said
		}
	}
	if w := strings.Join(r.Warnings, "\n"); w != l.warnings {
		it.Warnings, l.warnings = r.Warnings, w
	}
	res, err := l.s.Apply(ctx, r.Objects, cluster.ApplyOptions{Timeout: time.Minute})
	it.Latency = time.Since(first)
	it.Result = res
	now := map[string]bool{}
	for _, o := range l.s.Record().Owners {
		p := o.Paused()
		now[p] = true
		if !l.paused[p] {
			it.Paused = append(it.Paused, p)
		}
	}
	l.paused = now
	if err != nil {
		it.Err = err
		it.Retrying = cluster.IsUnreachable(err)
		if it.Retrying {
			l.inputs = nil // retried whatever changes
		}
		l.report(it)
		return it.Retrying
	}
	it.Ready, it.NotReady = l.readiness(ctx, res)
	l.report(it)
	return false
}

func (l *loop) report(it Iteration) {
	if l.o.OnIteration != nil {
		l.o.OnIteration(it)
	}
}

// watchInputs watches the directories the render read outside Dir.
func (l *loop) watchInputs(root string, inputs []v1alpha1.Input) {
	for _, in := range inputs {
		p := filepath.Join(root, filepath.FromSlash(in.Path))
		if p == l.dir || strings.HasPrefix(p, l.dir+string(filepath.Separator)) {
			continue
		}
		if strings.HasPrefix(in.Hash, "tree") {
			l.w.AddOne(p)
		} else {
			l.w.AddOne(filepath.Dir(p))
		}
	}
}

// readiness checks what the apply created or changed, until ready, the
// timeout, or the next change.
func (l *loop) readiness(ctx context.Context, res *cluster.Result) (bool, []cluster.Readiness) {
	var objs []*unstructured.Unstructured
	for _, ch := range res.Changes {
		if ch.Action != cluster.Created && ch.Action != cluster.Configured {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ch.Ref.Group + "/" + ch.Ref.Version)
		if ch.Ref.Group == "" {
			u.SetAPIVersion(ch.Ref.Version)
		}
		u.SetKind(ch.Ref.Kind)
		u.SetNamespace(ch.Ref.Namespace)
		u.SetName(ch.Ref.Name)
		objs = append(objs, u)
	}
	if len(objs) == 0 || l.o.ReadyTimeout < 0 {
		return len(objs) == 0, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		notReady []cluster.Readiness
		err      error
	}
	done := make(chan result, 1)
	go func() {
		nr, err := l.c.Wait(wctx, objs, l.o.ReadyTimeout)
		done <- result{nr, err}
	}()
	select {
	case r := <-done:
		return r.err == nil, r.notReady
	case ch := <-l.w.Changes():
		l.pending = &ch
		cancel()
		r := <-done
		return false, r.notReady
	}
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}
