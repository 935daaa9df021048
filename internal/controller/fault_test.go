package controller

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// fromController tells the controller's requests (go-git's) from the
// test's own pushes (the git command's).
func fromController(r *http.Request) bool { return strings.HasPrefix(r.UserAgent(), "go-git") }

// The git server goes down: the sync says so, backs off, and converges by
// itself once the server is back.
func TestGitServerDownThenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	e.git.FailWith(func(r *http.Request) int {
		if fromController(r) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("cm")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "while-down")
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if c.Reason != v1alpha1.ReasonFailed || !strings.Contains(c.Message, "503") || ms.Status.LastError != c.Message {
		t.Fatalf("while the server is down: %s %q (lastError %q)", c.Reason, c.Message, ms.Status.LastError)
	}
	if ms.Status.Destination == nil || ms.Status.Destination.Commit == "" {
		t.Error("a failure erased what was last done")
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", v1alpha1.ReasonFailed) })
	e.git.FailWith(nil)
	// No request: the backoff brings it back.
	e.eventually(40*time.Second, func() string {
		ms := e.sync("web")
		if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
			return "not Ready yet: " + c.Message
		}
		if ms.Status.Source.Commit != e.app.Head() {
			return "not at the new commit yet"
		}
		return ""
	})
}

// A registry that answers 429 (with Retry-After) and 5xx: the sync fails
// while it does, and converges when it stops.
func TestRegistryThrottlingAndErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	moved := e.reg.Push(t, "team/app:v1")
	for _, code := range []int{http.StatusTooManyRequests, http.StatusBadGateway} {
		e.reg.FailWith(func(r *http.Request) int {
			if strings.Contains(r.URL.Path, "/manifests/") {
				return code
			}
			return 0
		})
		e.requestReconcile(e.sync("web"), "failing-"+http.StatusText(code))
		ms := e.ready("web", metav1.ConditionFalse, 60*time.Second)
		if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonFailed {
			t.Fatalf("registry answering %d: %s %q", code, c.Reason, c.Message)
		}
		if ms.Status.Images[0].Digest == moved {
			t.Fatal("pinned while the registry failed")
		}
	}
	e.reg.FailWith(nil)
	e.requestReconcile(e.sync("web"), "registry-back")
	e.eventually(40*time.Second, func() string {
		ms := e.sync("web")
		if len(ms.Status.Images) != 1 || ms.Status.Images[0].Digest != moved {
			return "not re-pinned yet"
		}
		return ""
	})
	e.ready("web", metav1.ConditionTrue, 10*time.Second)
}

// The API server stops and comes back: the controller rides it out and
// goes on reconciling. (Not parallel: every test's API server stops.)
func TestAPIServerRestart(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("cm")
	e.app.Push("main")
	time.Sleep(3 * time.Second)
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, func() string {
		ms := &v1alpha1.ManifestSync{}
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, ms); err != nil {
			return err.Error()
		}
		return ""
	})
	e.requestReconcile(e.sync("web"), "after-restart")
	ms := e.ready("web", metav1.ConditionTrue, 60*time.Second)
	if ms.Status.Source.Commit != e.app.Head() {
		t.Fatalf("after the restart: source %s, want %s", ms.Status.Source.Commit, e.app.Head())
	}
}

// A RepoConfig hydrates what it finds; when its repository disappears it
// says so, and the folders written stay as they are.
func TestRepoConfigWhoseRepositoryDisappears(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	ctx := context.Background()
	e.app.Write(map[string]string{".sluice/web.yaml": e.expand(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: found-web}
spec:
  source: {repo: ., path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/found, path: apps/web}
`, "")}).Commit("sluice resources")
	e.app.Push("main")
	rc := e.apply(`apiVersion: sluice.dev/v1alpha1
kind: RepoConfig
metadata: {name: app}
spec:
  repo: APP
  globs: [".sluice/*.yaml"]
  interval: 1h
`)
	get := func() *v1alpha1.RepoConfig {
		obj := &v1alpha1.RepoConfig{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(rc), obj); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	waitReady := func(want metav1.ConditionStatus) *v1alpha1.RepoConfig {
		var obj *v1alpha1.RepoConfig
		e.eventually(30*time.Second, func() string {
			obj = get()
			c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != want || obj.Status.ObservedGeneration != obj.Generation ||
				obj.Status.LastHandledReconcileAt != obj.Annotations[v1alpha1.ReconcileRequestAnnotation] {
				return "RepoConfig not settled: " + condString(c)
			}
			return ""
		})
		return obj
	}
	obj := waitReady(metav1.ConditionTrue)
	if len(obj.Status.ManifestSyncs) != 1 || obj.Status.ManifestSyncs[0].Result != "committed" || !strings.Contains(obj.Status.Source, e.app.Head()[:7]) {
		t.Fatalf("RepoConfig status: %+v", obj.Status)
	}
	tree := e.dst("ls-tree", "-r", "--name-only", "env/found")
	if !strings.Contains(tree, "apps/web/deployment-web.yaml") {
		t.Fatalf("the found sync was not hydrated:\n%s", tree)
	}
	if err := os.RemoveAll(filepath.Join(e.git.Root, "app.git")); err != nil {
		t.Fatal(err)
	}
	e.requestReconcile(obj, "gone")
	obj = waitReady(metav1.ConditionFalse)
	if c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "app.git") {
		t.Errorf("the repository gone: %q", c.Message)
	}
	if got := e.dst("ls-tree", "-r", "--name-only", "env/found"); got != tree {
		t.Errorf("the destination changed:\n%s", got)
	}
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "no condition"
	}
	return string(c.Status) + " " + c.Reason + ": " + c.Message
}

// A git outage costs requests per repository, not per sync: twelve syncs
// over two source repositories, failing while the server answers 503,
// ask each repository a few times (the first failure, then retries at
// 5 s, 10 s, ... shared by every sync) where each sync retrying on its
// own asked once per sync per retry; each sync says what failed and when
// the next try is, and all converge by themselves once the server is
// back.
func TestAGitOutageCostsRequestsPerRepositoryNotPerSync(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	libURL := e.git.CreateRepo(t, "lib")
	lib := testenv.NewWork(t, libURL)
	lib.Write(map[string]string{"deploy/web/deployment.yaml": e.expand(deployment, "lib")}).Commit("lib")
	lib.Push("main")
	e.start()
	var names []string
	for i := range 12 {
		repo := e.appURL
		if i%2 == 1 {
			repo = libURL
		}
		name := fmt.Sprintf("web-%d", i)
		names = append(names, name)
		e.apply(fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %s}
spec:
  source: {repo: %s, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/dev, path: apps/%s}
  interval: 2s
`, name, repo, name))
	}
	for _, n := range names {
		e.ready(n, metav1.ConditionTrue, 60*time.Second)
	}
	var mu sync.Mutex
	asked := map[string]int{}
	e.git.FailWith(func(r *http.Request) int {
		if !fromController(r) {
			return 0
		}
		mu.Lock()
		asked[r.URL.Path]++
		mu.Unlock()
		return http.StatusServiceUnavailable
	})
	const outage = 14 * time.Second
	time.Sleep(outage)
	mu.Lock()
	got := maps.Clone(asked)
	mu.Unlock()
	// Failures at 0, then backing off 5 s and 10 s (±20 %): 3 requests a
	// repository in 14 s, 4 at most; each of six syncs retrying on its own
	// at 5 s, 10 s, ... asked about 12 times a repository.
	for _, repo := range []string{"/app.git/info/refs", "/lib.git/info/refs", "/deploy.git/info/refs"} {
		if n := got[repo]; n > 4 || (n < 1 && repo != "/deploy.git/info/refs") {
			t.Errorf("%s: %d requests in a %s outage, want at most 4 (six syncs read each source, twelve write the destination) (all: %v)", repo, n, outage, got)
		}
	}
	ms := e.sync("web-0")
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "503") || !strings.Contains(c.Message, "next try at") {
		t.Errorf("while the server is down, web-0 says: %s %q", c.Status, c.Message)
	}
	e.git.FailWith(nil)
	for _, n := range names {
		e.ready(n, metav1.ConditionTrue, 60*time.Second)
	}
}

// A registry holding look-ups back (429, Retry-After) while a followed tag
// has moved: the sync stays Ready with what it knows, but says the tag is
// not current and why (the look-up waits for the Retry-After, until
// when), rather than "up to date"; once the registry answers, the new
// digest is pinned and the note goes.
func TestASyncSaysWhyAMovedTagWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(strings.Replace(webSync, "interval: 1h", "interval: 2s", 1))
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	e.reg.RetryAfter(15)
	var pushing atomic.Bool // the test's own push is served
	e.reg.FailWith(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/manifests/") && !pushing.Load() {
			return http.StatusTooManyRequests
		}
		return 0
	})
	pushing.Store(true)
	moved := e.reg.Push(t, "team/app:v1")
	pushing.Store(false)
	e.eventually(20*time.Second, func() string {
		ms := e.sync("web")
		c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
		switch {
		case c.Status != metav1.ConditionTrue:
			return "not Ready: " + c.Message
		case !strings.Contains(c.Message, "not current: "+e.reg.Host+"/team/app:v1 last looked up at") ||
			!strings.Contains(c.Message, "waits for the registry's Retry-After, until"):
			return "Ready says nothing of the tag waiting: " + c.Message
		case ms.Status.Images[0].Digest == moved:
			return "pinned while the registry held look-ups back"
		}
		return ""
	})
	e.reg.FailWith(nil)
	e.eventually(40*time.Second, func() string {
		ms := e.sync("web")
		c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
		if ms.Status.Images[0].Digest != moved || strings.Contains(c.Message, "not current") {
			return "not re-pinned yet: " + c.Message
		}
		return ""
	})
}

// A followed tag deleted from the registry: the syncs following it fail
// saying so, their folders keep the digest last pinned (nothing is
// committed), the registry is asked about the tag about once an interval
// whatever the number of syncs, and the tag pushed again is pinned with
// nobody acting.
func TestATagThatDisappears(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	var names []string
	for i := range 4 {
		name := fmt.Sprintf("web-%d", i)
		names = append(names, name)
		e.apply(fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %s}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/dev, path: apps/%s}
  interval: 2s
`, name, name))
	}
	for _, n := range names {
		e.ready(n, metav1.ConditionTrue, 30*time.Second)
	}
	pinned := e.sync("web-0").Status.Images[0].Digest
	tip := testenv.Git(t, "", "--git-dir", e.dstDir, "rev-parse", "env/dev")
	var asked atomic.Int64
	e.reg.FailWith(func(r *http.Request) int {
		if strings.HasSuffix(r.URL.Path, "/team/app/manifests/v1") {
			asked.Add(1)
		}
		return 0
	})
	e.reg.Delete(t, "team/app:v1")
	start := time.Now()
	for _, n := range names {
		ms := e.ready(n, metav1.ConditionFalse, 30*time.Second)
		c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
		if !strings.Contains(c.Message, `tag "v1" not found`) || ms.Status.Images[0].Digest != pinned {
			t.Errorf("%s while the tag is gone: %q, pinned %s (was %s)", n, c.Message, ms.Status.Images[0].Digest, pinned)
		}
	}
	time.Sleep(6 * time.Second)
	// About once an interval (2 s), however many syncs follow it (4).
	if n, intervals := asked.Load(), time.Since(start)/(2*time.Second); n > 2*int64(intervals)+2 {
		t.Errorf("the deleted tag was asked about %d times in %d intervals by 4 syncs", n, intervals)
	}
	if got := testenv.Git(t, "", "--git-dir", e.dstDir, "rev-parse", "env/dev"); got != tip {
		t.Errorf("something was committed while the tag was gone: %s -> %s", tip, got)
	}
	back := e.reg.Push(t, "team/app:v1")
	for _, n := range names {
		e.eventually(40*time.Second, func() string {
			ms := e.sync(n)
			c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
			if c.Status != metav1.ConditionTrue || ms.Status.Images[0].Digest != back {
				return n + " not re-pinned yet: " + c.Message
			}
			return ""
		})
	}
}

// The destination refusing a push (a pre-receive hook, as a protected
// branch's): the sync says so in the server's own words, nothing is
// committed, and it lands by itself once the server accepts it.
func TestADestinationRefusingAPushIsQuotedAndRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := filepath.Join(e.dstDir, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'GL-HOOK-ERR: env/dev is protected: changes need a merge request' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.apply(strings.Replace(webSync, "interval: 1h", "interval: 4s", 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, `the server said: "GL-HOOK-ERR: env/dev is protected: changes need a merge request"`) {
		t.Errorf("a push the server refused: %q", c.Message)
	}
	if out, err := exec.Command("git", "--git-dir", e.dstDir, "rev-parse", "--verify", "-q", "env/dev").Output(); err == nil {
		t.Errorf("env/dev exists after a refused push: %s", out)
	}
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
}

// roundTripperFunc is an http.RoundTripper of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The API server, or etcd behind it, stops while a commit of four syncs
// is being pushed: the push lands, the statuses cannot be written. While
// it is down the controller does not spin (at most 3 requests a second)
// and says so once; once it is back, every status is right within the syncs'
// interval without anyone asking, and the change was committed once.
// (Not parallel: every test's API server stops.)
func TestAPIServerOrEtcdDownMidHydration(t *testing.T) {
	for _, part := range []struct {
		name        string
		stop, start func() error
	}{
		{"API server", cp.StopAPIServer, cp.StartAPIServer},
		{"etcd", cp.StopEtcd, cp.StartEtcd},
	} {
		t.Run(part.name, func(t *testing.T) {
			e := newEnv(t)
			var down atomic.Bool
			var requests, patches atomic.Int32
			e.start(func(o *Options) {
				cfg := rest.CopyConfig(o.Config)
				cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
					return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
						if down.Load() {
							requests.Add(1)
							if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status") {
								patches.Add(1)
							}
						}
						return rt.RoundTrip(r)
					})
				})
				o.Config = cfg
			})
			const n = 4
			for i := range n {
				e.apply(strings.NewReplacer("name: web", fmt.Sprintf("name: web-%d", i), "path: apps/web", fmt.Sprintf("path: apps/web-%d", i), "interval: 1h", "interval: 15s").Replace(webSync))
			}
			for i := range n {
				e.ready(fmt.Sprintf("web-%d", i), metav1.ConditionTrue, 60*time.Second)
			}
			pushing, proceed := make(chan struct{}), make(chan struct{})
			var held atomic.Bool
			hook := func(r *http.Request) {
				if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && fromController(r) && held.CompareAndSwap(false, true) {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					close(pushing)
					<-proceed
				}
			}
			e.hook.Store(&hook)
			before := e.tip("env/dev")
			e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {at: '" + part.name + "'}\n"}).Commit("cm")
			e.app.Push("main")
			for i := range n {
				e.requestReconcile(e.sync(fmt.Sprintf("web-%d", i)), "mid-"+part.name)
			}
			select {
			case <-pushing:
			case <-time.After(60 * time.Second):
				t.Fatal("the controller never pushed")
			}
			logged := len(e.logs.String())
			down.Store(true)
			if err := part.stop(); err != nil {
				t.Fatal(err)
			}
			close(proceed)
			const outage = 10 * time.Second
			time.Sleep(outage)
			down.Store(false)
			if err := part.start(); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			t.Logf("while %s was down (%s): %d requests, %d status patches", part.name, outage, requests.Load(), patches.Load())
			// Within the syncs' interval (15s), and the time to write.
			e.eventually(20*time.Second, func() string {
				for i := range n {
					ms := &v1alpha1.ManifestSync{}
					if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: fmt.Sprintf("web-%d", i)}, ms); err != nil {
						return err.Error()
					}
					ready := readyCondition(ms.Status.Conditions)
					if ready == nil || ready.Status != metav1.ConditionTrue || ms.Status.Source == nil || ms.Status.Source.Commit != e.app.Head() || ms.Status.LastHandledReconcileAt != "mid-"+part.name {
						return fmt.Sprintf("%s: %s, source %+v", ms.Name, condString(ready), ms.Status.Source)
					}
				}
				return ""
			})
			t.Logf("statuses right %s after %s came back", time.Since(back).Round(time.Second), part.name)
			// Batched as they came: one commit or more, each folder in one.
			for i := range n {
				folder := fmt.Sprintf("apps/web-%d", i)
				if c := e.commits(before, "env/dev", folder); c != 1 {
					t.Fatalf("%s changed in %d commits for one change:\n%s", folder, c, e.dst("log", "--oneline", before+"..env/dev"))
				}
			}
			during := e.logs.String()[logged:]
			t.Logf("logs while down and after: %d lines, %d 'Reconciler error'", strings.Count(during, "\n"), strings.Count(during, "Reconciler error"))
			if p := patches.Load(); p > n {
				t.Errorf("%d status patches while %s was down: a sync retried its status on its own (want at most one each, %d)", p, part.name, n)
			}
			if c := strings.Count(during, "Reconciler error"); c > 0 {
				t.Errorf("%d reconciles failed with an error for controller-runtime to retry: the outage was not recognised", c)
			}
			// Seen and said, once each, whichever part stopped: etcd gone,
			// the API server takes writes and answers none.
			if c := strings.Count(during, "the API server does not answer"); c != 1 {
				t.Errorf("the outage was said %d times, want once", c)
			}
			if c := strings.Count(during, "the API server answers again"); c != 1 {
				t.Errorf("the return was said %d times, want once", c)
			}
			// No hot loop: the informers' re-lists and watches, the
			// prober's looks and one status write per sync. A reconcile
			// retried at once did hundreds a second.
			if r := requests.Load(); r > int32(outage/time.Second)*3 {
				t.Errorf("%d requests in a %s outage: more than 3 a second", r, outage)
			}
		})
	}
}

// Credentials revoked on the git server: the sync says the server refused
// them, the repository is asked about once per backoff, not per sync;
// the Secret rotated, the sync recovers by itself, with nobody asking.
func TestRevokedCredentialsThenARotatedSecret(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, "bot", "old")
	e.start()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: e.ns}, StringData: map[string]string{"username": "bot", "password": "old"}}
	if err := e.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	const n = 3
	for i := range n {
		e.apply(strings.NewReplacer("name: web", fmt.Sprintf("name: web-%d", i),
			"path: deploy/web}", "path: deploy/web, secretRef: {name: git}}",
			"path: apps/web}", fmt.Sprintf("path: apps/web-%d, secretRef: {name: git}}", i), "interval: 1h", "interval: 20s").Replace(webSync))
	}
	for i := range n {
		e.ready(fmt.Sprintf("web-%d", i), metav1.ConditionTrue, 60*time.Second)
	}
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("cm")
	e.app.Push("main")

	e.git.SetBasicAuth("bot", "new") // the old token revoked
	var refused atomic.Int32
	hook := func(r *http.Request) {
		if u, p, _ := r.BasicAuth(); fromController(r) && u == "bot" && p == "old" {
			refused.Add(1)
		}
	}
	e.hook.Store(&hook)
	for i := range n {
		e.requestReconcile(e.sync(fmt.Sprintf("web-%d", i)), "revoked")
	}
	e.eventually(30*time.Second, func() string {
		for i := range n {
			c := readyCondition(e.sync(fmt.Sprintf("web-%d", i)).Status.Conditions)
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "the server refused the credentials given") {
				return fmt.Sprintf("web-%d: %s", i, condString(c))
			}
		}
		return ""
	})
	t.Logf("the sync says: %s", readyCondition(e.sync("web-0").Status.Conditions).Message)
	time.Sleep(15 * time.Second)
	// Over about 20s: the first try and its backoffs (5s, 10s), for the
	// source and the destination, whatever the number of syncs.
	if got := refused.Load(); got > 8 {
		t.Errorf("%d requests with the revoked credentials in about 20s for %d syncs: want at most 8", got, n)
	}
	t.Logf("%d requests with the revoked credentials", refused.Load())

	secret.StringData = map[string]string{"username": "bot", "password": "new"}
	if err := e.c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	e.eventually(45*time.Second, func() string {
		return e.notReadyAtHead(webs(n)...)
	})
	t.Logf("recovered %s after the Secret was rotated", time.Since(rotated).Round(time.Second))
}

// The connection reset after the destination took a push, before its
// answer arrived: the controller cannot know the push landed; it finds
// so, and does not push the change twice.
func TestAPushWhoseAnswerIsLostIsNotPushedTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	before := e.tip("env/dev")
	var cut, pushes atomic.Int32
	e.git.CutAfter(func(r *http.Request) int64 {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && fromController(r) {
			if pushes.Add(1) == 1 {
				cut.Add(1)
				return 0
			}
		}
		return -1
	})
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("cm")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "cut")
	e.eventually(60*time.Second, func() string {
		return e.notReadyAtHead("web")
	})
	if cut.Load() != 1 {
		t.Fatalf("the answer to the push was cut %d times, want 1", cut.Load())
	}
	if c := e.commits(before, "env/dev"); c != 1 {
		t.Fatalf("%d commits for one change:\n%s", c, e.dst("log", "--oneline", before+"..env/dev"))
	}
	if got := e.sync("web").Status.Destination.Commit; got != e.tip("env/dev") {
		t.Errorf("the status names commit %s, the branch is at %s", got, e.tip("env/dev"))
	}
	t.Logf("%d pushes for the change", pushes.Load())
}

// The cache's disk full (a tmpfs of 16 MiB, filled up) when a source
// change arrives: the sync says the disk is full, nothing is committed,
// and once space returns it commits the change by itself, once.
func TestACacheDiskFullThenFreed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", dir).CombinedOutput(); err != nil {
		why := fmt.Sprintf("cannot mount a small filesystem here (it needs root, or CAP_SYS_ADMIN): %v: %s", err, bytes.TrimSpace(out))
		if os.Getenv("SLUICE_TEST_NO_TMPFS") == "" {
			t.Fatalf("%s; run as root, or set SLUICE_TEST_NO_TMPFS=1 to acknowledge that a full cache disk goes untested here", why)
		}
		t.Skipf("%s, acknowledged by SLUICE_TEST_NO_TMPFS: a full cache disk is untested here", why)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	e := newEnv(t)
	e.start(func(o *Options) { o.CacheDir = filepath.Join(dir, "cache") })
	e.apply(strings.Replace(webSync, "interval: 1h", "interval: 20s", 1))
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	before := e.tip("env/dev")

	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	noise := make([]byte, 256<<10)
	rand.Read(noise)
	e.app.Write(map[string]string{
		"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
		"assets/noise.txt":   hex.EncodeToString(noise),
	}).Commit("cm and assets")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "full")
	e.eventually(30*time.Second, func() string {
		c := readyCondition(e.sync("web").Status.Conditions)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "no space left on device (the clone cache's disk is full") {
			return condString(c)
		}
		return ""
	})
	t.Logf("the sync says: %s", readyCondition(e.sync("web").Status.Conditions).Message)
	if e.tip("env/dev") != before {
		t.Fatalf("something was committed with the disk full:\n%s", e.dst("log", "--oneline", before+"..env/dev"))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	e.eventually(60*time.Second, func() string {
		return e.notReadyAtHead("web")
	})
	t.Logf("committed %s after the space returned", time.Since(freed).Round(time.Second))
	if c := e.commits(before, "env/dev"); c != 1 {
		t.Fatalf("%d commits for one change:\n%s", c, e.dst("log", "--oneline", before+"..env/dev"))
	}
	if got := e.dst("show", "env/dev:apps/web/configmap-web.yaml"); !strings.Contains(got, "name: web") {
		t.Fatalf("the change did not land once the space returned: apps/web/configmap-web.yaml holds %q", got)
	}
}

// A git server taking 10s to answer each request: the change still lands,
// once, and the syncs sharing its repositories share its requests (they
// queue on one clone instead of each asking).
func TestASlowGitServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	const n = 3
	for i := range n {
		e.apply(strings.NewReplacer("name: web", fmt.Sprintf("name: web-%d", i), "path: apps/web", fmt.Sprintf("path: apps/web-%d", i)).Replace(webSync))
	}
	for i := range n {
		e.ready(fmt.Sprintf("web-%d", i), metav1.ConditionTrue, 60*time.Second)
	}
	before := e.tip("env/dev")
	var slow atomic.Int32
	hook := func(r *http.Request) {
		if fromController(r) {
			slow.Add(1)
		}
	}
	e.hook.Store(&hook)
	e.git.Delay(func(r *http.Request) time.Duration {
		if fromController(r) {
			return 10 * time.Second
		}
		return 0
	})
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("cm")
	e.app.Push("main")
	start := time.Now()
	for i := range n {
		e.requestReconcile(e.sync(fmt.Sprintf("web-%d", i)), "slow")
	}
	e.eventually(150*time.Second, func() string {
		return e.notReadyAtHead(webs(n)...)
	})
	t.Logf("%d syncs hydrated in %s through a server taking 10s a request, %d requests", n, time.Since(start).Round(time.Second), slow.Load())
	for i := range n {
		folder := fmt.Sprintf("apps/web-%d", i)
		if c := e.commits(before, "env/dev", folder); c != 1 {
			t.Fatalf("%s changed in %d commits for one change:\n%s", folder, c, e.dst("log", "--oneline", before+"..env/dev"))
		}
	}
	// Each repository's ref listing and fetch, and a push (two requests)
	// per commit: about 8 whatever the number of syncs; 3 asking each
	// would be 12 or more before any push.
	if got := slow.Load(); got > 10 {
		t.Errorf("%d requests for %d syncs sharing two repositories", got, n)
	}
}

// notReadyAtHead is "" once every named sync is Ready having hydrated the
// app's head, or else what the first one that is not says.
func (e *env) notReadyAtHead(names ...string) string {
	for _, name := range names {
		ms := e.sync(name)
		if c := readyCondition(ms.Status.Conditions); c == nil || c.Status != metav1.ConditionTrue || ms.Status.Source == nil || ms.Status.Source.Commit != e.app.Head() {
			return name + ": " + condString(c)
		}
	}
	return ""
}

// webs names n syncs web-0 … web-(n-1).
func webs(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("web-%d", i)
	}
	return names
}
