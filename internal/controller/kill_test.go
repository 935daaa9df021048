package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/devcluster"
)

// childEnv, set, makes the test binary a controller process of its own
// (see TestKilledMidPush): its value is the childOptions as JSON.
const childEnv = "SLUICE_TEST_CONTROLLER"

type childOptions struct {
	Kubeconfig, CacheDir, Selector string
	// LeaderNamespace and LeaderID, set, elect a leader through a Lease
	// that lasts Lease (with its renew deadline and retry period scaled
	// down from the defaults alike).
	LeaderNamespace, LeaderID string
	Lease                     time.Duration
}

// child runs a controller until it is killed.
func child() int {
	var o childOptions
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &o); err != nil {
		return 2
	}
	cfg, err := cluster.RESTConfig(cluster.ConnectOptions{Kubeconfig: o.Kubeconfig})
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	opts := Options{Config: cfg, CacheDir: o.CacheDir, WatchLabelSelector: o.Selector, MetricsAddr: "0", ProbeAddr: "0", HookAddr: "0", AllowRemoteHosts: []string{"127.0.0.1"},
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if o.LeaderID != "" {
		opts.LeaderElection, opts.LeaderElectionNamespace, opts.LeaderElectionID = true, o.LeaderNamespace, o.LeaderID
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = o.Lease, o.Lease*2/3, o.Lease*2/15
	}
	err = Run(ctx, opts)
	if err != nil {
		opts.Log.Error("the controller stopped", "error", err)
		return 1
	}
	return 0
}

// startChild starts a controller process.
func (e *env) startChild(cacheDir string, with ...func(*childOptions)) *exec.Cmd {
	e.t.Helper()
	o := childOptions{Kubeconfig: cp.Kubeconfig, CacheDir: cacheDir, Selector: "sluice.dev/test=" + e.shard}
	for _, f := range with {
		f(&o)
	}
	opts, _ := json.Marshal(o)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(opts))
	cmd.Stderr = e.logs
	devcluster.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// The controller killed with SIGKILL in the middle of a push, then
// restarted: the destination holds exactly one commit for the change,
// whether the push landed after the controller died (it never learned
// so) or never landed at all.
func TestKilledMidPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cacheDir := t.TempDir()
	ctrl := e.startChild(cacheDir)
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)

	for round, lands := range []bool{true, false} {
		before := e.tip("env/dev")
		pushing := make(chan struct{})
		proceed := make(chan struct{})
		hook := func(r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-receive-pack") || !fromController(r) {
				return
			}
			// The whole push is in hand: hold it until the controller is
			// dead, then let it land, or fail it.
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			close(pushing)
			<-proceed
		}
		e.hook.Store(&hook)
		if !lands {
			e.git.FailWith(func(r *http.Request) int {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && fromController(r) {
					return http.StatusInternalServerError
				}
				return 0
			})
		}
		e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {round: '" + string(rune('0'+round)) + "'}\n"}).Commit("change")
		e.app.Push("main")
		e.requestReconcile(e.sync("web"), "round-"+string(rune('0'+round)))
		select {
		case <-pushing:
		case <-time.After(60 * time.Second):
			t.Fatal("the controller never pushed")
		}
		if err := ctrl.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		ctrl.Wait()
		close(proceed)
		e.hook.Store(nil)
		// The held push lands (or fails): every request answered.
		e.eventually(30*time.Second, func() string {
			if served, got := e.git.Served.Load(), e.git.Requests.Load(); served != got {
				return fmt.Sprintf("%d of %d requests answered", served, got)
			}
			return ""
		})
		e.git.FailWith(nil)
		if landed := e.tip("env/dev") != before; landed != lands {
			t.Fatalf("round %d: the push landed: %v, want %v", round, landed, lands)
		}

		ctrl = e.startChild(cacheDir)
		e.eventually(60*time.Second, func() string {
			ms := e.sync("web")
			if ms.Status.Source == nil || ms.Status.Source.Commit != e.app.Head() || ms.Status.LastHandledReconcileAt != ms.Annotations["reconcile.sluice.dev/requestedAt"] {
				return "the restarted controller has not reconciled the change"
			}
			return ""
		})
		e.ready("web", metav1.ConditionTrue, 30*time.Second)
		if n := e.commits(before, "env/dev"); n != 1 {
			t.Fatalf("round %d (push landed: %v): %d commits for one change:\n%s", round, lands, n, e.dst("log", "--oneline", before+"..env/dev"))
		}
		if !strings.Contains(e.dst("show", "env/dev:apps/web/configmap-web.yaml"), "round: '"+string(rune('0'+round))+"'") {
			t.Fatalf("round %d: the destination does not hold the change:\n%s", round, e.dst("show", "env/dev:apps/web/configmap-web.yaml"))
		}
	}
}

// A leader whose Lease another replica has taken (as one does once this
// one missed its renewals: a partition from the API server, a long
// pause) goes on working until its own renew deadline runs out. A change
// it hydrates meanwhile is a fast-forward nobody else has made, which the
// git server takes: only the check before each push, that the Lease as
// the API server holds it is still this replica's, keeps it from landing.
// Then the replica stops, leaving the Lease to its holder.
func TestALeaderWhoseLeaseWasTakenPushesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	id := "sluice-" + e.shard
	// A 30 s Lease: a 20 s renew deadline, renewals every 4 s.
	stale := e.startChild(t.TempDir(), func(o *childOptions) { o.LeaderNamespace, o.LeaderID, o.Lease = e.ns, id, 30*time.Second })
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	tip := e.tip("env/dev")

	lease := &coordinationv1.Lease{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: id}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("no Lease held: %v", err)
	}
	const other = "another-replica_1"
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.AcquireTime, lease.Spec.RenewTime = ptr.To(other), &now, &now
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(60))
	lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	if err := e.c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()

	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: 'stale'}\n"}).Commit("a change")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "after the Lease was taken")
	ms := e.ready("web", metav1.ConditionFalse, 15*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "no longer leads: Lease "+e.ns+"/"+id+" is held by "+other) {
		t.Errorf("the refused push says: %s", c.Message)
	}
	if d := time.Since(taken); d > 20*time.Second {
		t.Fatalf("the reconcile came %s after the Lease was taken, past the replica's renew deadline: the check was not what stopped it", d)
	}
	if got := e.tip("env/dev"); got != tip {
		t.Fatalf("a replica that no longer leads pushed:\n%s", e.dst("log", "--format=%h %s", tip+".."+got))
	}

	exited := make(chan error, 1)
	go func() { exited <- stale.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Error("the replica exited cleanly; want an exit saying it lost the Lease")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the replica still runs a minute after its Lease was taken")
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: id}, lease); err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != other {
		t.Errorf("the Lease after the replica stopped: holder %q (%v), want %s", ptr.Deref(lease.Spec.HolderIdentity, ""), err, other)
	}
	if got := e.tip("env/dev"); got != tip {
		t.Fatalf("the branch moved:\n%s", e.dst("log", "--format=%h %s", tip+".."+got))
	}
}

// A leader paused (SIGSTOP) past its Lease, in the middle of a push,
// while the other replica takes over and hydrates a newer change, then
// resumed (SIGCONT): what it had in flight (the older change) never lands
// on top of the new leader's commit, it pushes at most the one push it
// was in (refused by the git server: the branch moved), and it stops.
func TestAStaleLeaderLandsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := "sluice-" + e.shard
	elect := func(o *childOptions) { o.LeaderNamespace, o.LeaderID, o.Lease = e.ns, id, 6*time.Second }
	stale := e.startChild(t.TempDir(), elect)
	e.eventually(30*time.Second, func() string {
		lease := &coordinationv1.Lease{}
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: id}, lease); err != nil || lease.Spec.HolderIdentity == nil {
			return fmt.Sprintf("no Lease held yet (%v)", err)
		}
		return ""
	})
	e.startChild(t.TempDir(), elect) // waits on the Lease
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)

	// Hold the leader's next push at its ref advertisement: it has made
	// its commit, asked whether it leads (it does), and is pushing.
	pushing, proceed := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	var posts atomic.Int32
	hook := func(r *http.Request) {
		if !fromController(r) || !strings.Contains(r.URL.Path+"?"+r.URL.RawQuery, "service=git-receive-pack") && !strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			return
		}
		if r.Method == http.MethodPost {
			posts.Add(1)
			return
		}
		if held.CompareAndSwap(false, true) {
			close(pushing)
			<-proceed
		}
	}
	e.hook.Store(&hook)
	cm := func(v string) map[string]string {
		return map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: '" + v + "'}\n"}
	}
	e.app.Write(cm("old")).Commit("old")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "old")
	select {
	case <-pushing:
	case <-time.After(60 * time.Second):
		t.Fatal("the leader never pushed")
	}
	if err := stale.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	close(proceed) // the advertisement waits in the paused leader's socket

	// The other replica takes the Lease once it runs out, and hydrates
	// the newer change.
	e.app.Write(cm("new")).Commit("new")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "new")
	e.eventually(90*time.Second, func() string {
		if got := e.dst("show", "env/dev:apps/web/configmap-web.yaml"); !strings.Contains(got, "v: 'new'") {
			return "the new leader has not committed the newer change: the folder holds " + got + "; source at " + e.app.Head()
		}
		return ""
	})
	tip := e.tip("env/dev")
	before := posts.Load()
	holder := func() string {
		lease := &coordinationv1.Lease{}
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: id}, lease); err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	leader := holder()

	if err := stale.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- stale.Wait() }()
	// The new leader keeps the Lease throughout: the stale one stepping
	// down does not clear it.
	var holders []string
	watch := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if h := holder(); h != leader && (len(holders) == 0 || holders[len(holders)-1] != h) {
				holders = append(holders, h)
			}
		}
	}
	done := false
	for deadline := time.Now().Add(60 * time.Second); !done; {
		select {
		case err := <-exited:
			if err == nil {
				t.Error("the stale leader exited cleanly; want an exit saying it lost the Lease")
			}
			done = true
		default:
			if time.Now().After(deadline) {
				t.Fatal("the stale leader still runs a minute after it was resumed")
			}
			watch(200 * time.Millisecond)
		}
	}
	// Whatever it had left to do has been tried by now; the new leader
	// has nothing to push.
	watch(3 * time.Second)
	if len(holders) > 0 {
		t.Errorf("the Lease held by %s went to %q after the stale leader resumed", leader, holders)
	}
	if got := e.tip("env/dev"); got != tip {
		t.Fatalf("the branch moved after the stale leader resumed:\n%s\nnow holds:\n%s", e.dst("log", "--format=%h %s", tip+".."+got), e.dst("show", "env/dev:apps/web/configmap-web.yaml"))
	}
	if n := posts.Load() - before; n > 1 {
		t.Errorf("%d pushes after the stale leader resumed; want at most the one it was in", n)
	}
	if !strings.Contains(e.logs.String(), "leader election lost") {
		t.Errorf("the stale leader did not say it lost the Lease:\n%s", e.logs.String())
	}
}
