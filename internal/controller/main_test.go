package controller

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) {
	if sandbox.IsWorker(os.Args) {
		os.Exit(sandbox.WorkerMain(os.Args))
	}
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	// An Event of a reason the controller does not list fails the run.
	var mu sync.Mutex
	var seen []string
	note := func(msg string) { mu.Lock(); seen = append(seen, msg); mu.Unlock() }
	unlisted.Store(&note)
	testenv.RunWithControlPlane(runChecked{m, func() int {
		mu.Lock()
		defer mu.Unlock()
		for _, msg := range seen {
			fmt.Fprintln(os.Stderr, "FAIL:", msg)
		}
		return len(seen)
	}}, &cp)
}

// runChecked runs the tests, then fails the run if check finds anything.
type runChecked struct {
	m     *testing.M
	check func() int
}

func (r runChecked) Run() int {
	code := r.m.Run()
	if r.check() > 0 && code == 0 {
		code = 1
	}
	return code
}

// env is one test's world: a namespace on the test API server, a git
// server with a source and a destination repository, a registry, and a
// client. Its resources carry a label that only this test's controllers
// select, so that tests running side by side do not reconcile each
// other's.
type env struct {
	t      *testing.T
	ns     string
	shard  string
	c      client.Client
	git    *testenv.GitServer
	reg    *testenv.Registry
	app    *testenv.Work
	appURL string
	dstURL string
	dstDir string
	logs   *logBuffer
	// hook, when set, sees each request to the git server before it is
	// served.
	hook atomic.Pointer[func(*http.Request)]
}

var shards atomic.Int64

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      containers: [{name: app, image: REG/team/app:v1}]
`

func newEnv(t *testing.T) *env { return newEnvWith(t, "", "") }

// newEnvWith is newEnv with a git server that asks for a user and
// password.
func newEnvWith(t *testing.T, user, password string) *env {
	t.Helper()
	e := &env{}
	gitOpts := []testenv.GitServerOption{testenv.WithHook(func(r *http.Request) {
		if h := e.hook.Load(); h != nil {
			(*h)(r)
		}
	})}
	if user != "" {
		gitOpts = append(gitOpts, testenv.WithBasicAuth(user, password))
	}
	c, err := client.New(cp.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	*e = env{t: t, ns: testenv.Namespace("ctrl"), shard: fmt.Sprintf("t%d-%d", os.Getpid(), shards.Add(1)), c: c,
		git: testenv.NewGitServer(t, gitOpts...), reg: testenv.NewRegistry(t), logs: &logBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller logs:\n%s", e.logs.tail(300))
		}
	})
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}); err != nil {
		t.Fatal(err)
	}
	e.reg.Push(t, "team/app:v1")
	withAuth := func(u string) string {
		if user == "" {
			return u
		}
		return strings.Replace(u, "http://", "http://"+user+":"+password+"@", 1)
	}
	e.appURL = e.git.CreateRepo(t, "app")
	e.app = testenv.NewWork(t, withAuth(e.appURL))
	e.app.Write(map[string]string{
		"deploy/web/deployment.yaml": e.expand(deployment, "web"),
		"deploy/api/deployment.yaml": e.expand(deployment, "api"),
	}).Commit("sources")
	e.app.Push("main")
	e.dstURL = e.git.CreateRepo(t, "deploy")
	e.dstDir = e.git.Root + "/deploy.git"
	d := testenv.NewWork(t, withAuth(e.dstURL))
	d.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	d.Push("main")
	return e
}

func (e *env) expand(s, name string) string {
	return strings.NewReplacer("REG", e.reg.Host, "NAME", name, "APP", e.appURL, "DST", e.dstURL, "SHARD", e.shard).Replace(s)
}

// options are a controller's for this test: its shard, a cache of its
// own, every server on a free loopback port, renders in worker processes
// (this test binary, as `sluice serve` is its own).
func (e *env) options() Options {
	sb, err := sandbox.New(sandbox.Options{Command: []string{os.Args[0], sandbox.WorkerArg}, Observe: ObserveWorker})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(sb.Close)
	return Options{
		Sandbox: sb,
		Config:  cp.Config, CacheDir: e.t.TempDir(), WatchLabelSelector: "sluice.dev/test=" + e.shard,
		MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0", HookAddr: "127.0.0.1:0",
		// The test's git servers and registry are on loopback, as a team's
		// in-cluster ones would be on a cluster's network: named.
		AllowRemoteHosts: []string{"127.0.0.1"},
		Log:              slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// start runs a controller until the test ends (or stop is called).
func (e *env) start(mod ...func(*Options)) (Addrs, func()) {
	e.t.Helper()
	o := e.options()
	for _, m := range mod {
		m(&o)
	}
	ready := make(chan Addrs, 1)
	o.Ready = func(a Addrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var a Addrs
	select {
	case a = <-ready:
	case err := <-done:
		cancel()
		e.t.Fatalf("controller: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("controller: %v", err)
		}
	}
	e.t.Cleanup(stop)
	return a, stop
}

// apply creates or updates a Sluice resource from YAML (REG, APP, DST and
// SHARD replaced), in the test's namespace and shard.
func (e *env) apply(y string) client.Object {
	e.t.Helper()
	y = e.expand(y, "")
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(y), &tm); err != nil {
		e.t.Fatal(err)
	}
	var obj client.Object
	switch tm.Kind {
	case v1alpha1.KindManifestSync:
		obj = &v1alpha1.ManifestSync{}
	case v1alpha1.KindImage:
		obj = &v1alpha1.Image{}
	case v1alpha1.KindRepoConfig:
		obj = &v1alpha1.RepoConfig{}
	default:
		e.t.Fatalf("kind %q", tm.Kind)
	}
	if err := yaml.UnmarshalStrict([]byte(y), obj); err != nil {
		e.t.Fatal(err)
	}
	obj.SetNamespace(e.ns)
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	if _, ok := l["sluice.dev/test"]; !ok {
		l["sluice.dev/test"] = e.shard
	}
	obj.SetLabels(l)
	ctx := context.Background()
	cur := obj.DeepCopyObject().(client.Object)
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err == nil {
		obj.SetResourceVersion(cur.GetResourceVersion())
		if err := e.c.Update(ctx, obj); err != nil {
			e.t.Fatal(err)
		}
		return obj
	}
	if err := e.c.Create(ctx, obj); err != nil {
		e.t.Fatal(err)
	}
	return obj
}

// sync reads a ManifestSync.
func (e *env) sync(name string) *v1alpha1.ManifestSync {
	e.t.Helper()
	ms := &v1alpha1.ManifestSync{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, ms); err != nil {
		e.t.Fatal(err)
	}
	return ms
}

// eventually polls f until it returns "" (done), failing the test with
// its last answer after d.
func (e *env) eventually(d time.Duration, f func() string) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		if last = f(); last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("after %s: %s", d, last)
}

// ready waits until a sync's Ready condition is status for its current
// generation and past the given reconcile request, and returns it.
func (e *env) ready(name string, status metav1.ConditionStatus, d time.Duration) *v1alpha1.ManifestSync {
	e.t.Helper()
	var ms *v1alpha1.ManifestSync
	e.eventually(d, func() string {
		ms = e.sync(name)
		c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
		req := ms.Annotations[v1alpha1.ReconcileRequestAnnotation]
		switch {
		case c == nil:
			return name + ": no Ready condition"
		case ms.Status.ObservedGeneration != ms.Generation || c.ObservedGeneration != ms.Generation:
			return fmt.Sprintf("%s: generation %d observed %d", name, ms.Generation, ms.Status.ObservedGeneration)
		case req != ms.Status.LastHandledReconcileAt:
			return fmt.Sprintf("%s: request %q not handled yet (last %q)", name, req, ms.Status.LastHandledReconcileAt)
		case c.Status != status:
			return fmt.Sprintf("%s: Ready=%s %s: %s", name, c.Status, c.Reason, c.Message)
		}
		return ""
	})
	return ms
}

// requestReconcile sets the reconcile request annotation, as
// `kubectl annotate --overwrite ... reconcile.sluice.dev/requestedAt=$(date +%s)` does.
func (e *env) requestReconcile(obj client.Object, value string) {
	e.t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, value))
	if err := e.c.Patch(context.Background(), obj, patch); err != nil {
		e.t.Fatal(err)
	}
}

// git runs git in the destination repository on the server; "" when it
// fails (a branch that does not exist).
func (e *env) dst(args ...string) string {
	out, err := exec.Command("git", append([]string{"--git-dir", e.dstDir}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// commits counts the commits on the destination's branch since before
// ("": all of them) that change one of paths (none: any); the test fails
// when git cannot say (a branch that does not exist included).
func (e *env) commits(before, branch string, paths ...string) int {
	e.t.Helper()
	span := branch
	if before != "" {
		span = before + ".." + branch
	}
	args := append([]string{"--git-dir", e.dstDir, "rev-list", "--count", span, "--"}, paths...)
	out, err := exec.Command("git", args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("git rev-list --count %s: %v\n%s", span, err, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		e.t.Fatalf("git rev-list --count %s said %q", span, out)
	}
	return n
}

// tip is the destination branch's commit ("" when it does not exist).
func (e *env) tip(branch string) string {
	return e.dst("rev-parse", "--verify", "-q", "refs/heads/"+branch)
}

// logBuffer keeps a controller's logs, shown when the test fails.
type logBuffer struct{ testenv.Buffer }

// tail is the last n lines.
func (l *logBuffer) tail(n int) string {
	lines := strings.Split(l.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
