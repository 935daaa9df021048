package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/session"
	"sluice.dev/sluice/internal/testenv"
)

// syncBuffer is a buffer a running command writes while the test reads.
type syncBuffer = testenv.Buffer

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nsDump(t *testing.T, ns string) map[string]map[string]any {
	t.Helper()
	d, err := testenv.Dump(cp.Config, []string{ns}, nil, "reconcile.fluxcd.io/requestedAt", "argocd.argoproj.io/refresh")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRunCLIFromARunConfig(t *testing.T) {
	ns := testenv.Namespace("clirun")
	kc := "--kubeconfig=" + cp.Kubeconfig
	if _, stderr, code := run(t, "apply", writeTree(t, map[string]string{"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n"}), kc); code != 0 {
		t.Fatal(stderr)
	}
	before := nsDump(t, ns)
	dir := writeTree(t, map[string]string{
		"run.yaml":          "apiVersion: sluice.dev/v1alpha1\nkind: RunConfig\nmetadata: {name: dev}\nspec:\n  path: deploy\n  namespace: " + ns + "\n  session: cli-" + strings.ReplaceAll(ns, "-", "") + "\n  readyTimeout: 100ms\n",
		"deploy/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: slow}\n",
		"deploy/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n",
	})
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- Run(ctx, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"run", "-f", filepath.Join(dir, "run.yaml"), kc})
	}()
	waitFor(t, "the first iteration", func() bool { return strings.Contains(out.String(), "#1 ") })
	if !strings.Contains(out.String(), "2 created: configmap/other created, configmap/settings created") {
		t.Errorf("first line:\n%s", out.String())
	}
	lout, _, code := run(t, "run", "list", kc)
	if code != 0 || !strings.Contains(lout, "cli-"+strings.ReplaceAll(ns, "-", "")) || !strings.Contains(lout, "active") || !strings.Contains(lout, "HEARTBEAT") {
		t.Errorf("run list: %d\n%s", code, lout)
	}
	os.WriteFile(filepath.Join(dir, "deploy/cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n"), 0o644)
	waitFor(t, "the second iteration", func() bool { return strings.Contains(out.String(), "#2 ") })
	if !strings.Contains(out.String(), "1 configured, 1 unchanged: configmap/settings configured  ready") {
		t.Errorf("second line:\n%s", out.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "ended: deleted 2 (configmap/other, configmap/settings)") {
		t.Errorf("stderr:\n%s", errb.String())
	}
	if after := nsDump(t, ns); !reflect.DeepEqual(before, after) {
		t.Errorf("the namespace changed:\n%v\n%v", before, after)
	}
}

func TestRunCLIRefusesARemoteLookingContextUnlessNamed(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: prod, cluster: {server: "https://10.255.255.1:6443"}}]
users: [{name: me, user: {token: x}}]
contexts: [{name: prod-eks, context: {cluster: prod, user: me}}]
current-context: prod-eks
`), 0o600)
	_, stderr, code := run(t, "run", t.TempDir(), "--kubeconfig", kc)
	if code != 2 || !strings.Contains(stderr, `context "prod-eks" (API server https://10.255.255.1:6443) does not look like a local cluster: name it with --context, or pass --yes`) {
		t.Errorf("exit %d:\n%s", code, stderr)
	}
}

func TestRunCLIBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", ".", "--mode", "sideways"}, "--mode sideways: must be replace or version"},
		{[]string{"run", ".", "--pause", "everything"}, "--pause everything: must be object or owner"},
		{[]string{"run", ".", "--session", "Not_A_Label"}, "--session: session name"},
		{[]string{"run", ".", "--ref", "main"}, "--ref names a branch of --repo"},
		{[]string{"run", ".", "--handoff", "--mode", "version"}, "--handoff hands over"},
		{[]string{"diff", "--against", "b"}, "--against compares two namespaces"},
	}
	for _, tt := range tests {
		_, stderr, code := run(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d\n%s\nwant %q", tt.args, code, stderr, tt.want)
		}
	}
	dir := writeTree(t, map[string]string{"run.yaml": "apiVersion: sluice.dev/v1alpha1\nkind: RunConfig\nmetadata: {name: dev}\nspec:\n  mode: sideways\n  poll: 5s\n"})
	_, stderr, code := run(t, "run", "-f", filepath.Join(dir, "run.yaml"))
	if code != 2 || !strings.Contains(stderr, "run.yaml:5: RunConfig dev: spec.mode: Unsupported value") || !strings.Contains(stderr, "spec.poll") {
		t.Errorf("bad RunConfig: exit %d\n%s", code, stderr)
	}
}

// TestKilledSessionIsRestoredByCleanup kills a session process with
// SIGKILL mid-session; `sluice run cleanup` then puts everything back.
func TestKilledSessionIsRestoredByCleanup(t *testing.T) {
	ns := testenv.Namespace("kill")
	kc := "--kubeconfig=" + cp.Kubeconfig
	if _, stderr, code := run(t, "apply", writeTree(t, map[string]string{"all.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: " + ns + "}\ndata: {mode: prod}\n"}), kc); code != 0 {
		t.Fatal(stderr)
	}
	before := nsDump(t, ns)
	dir := writeTree(t, map[string]string{
		"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: dev}\n",
		"new.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new}\n",
	})
	name := "kill-" + strings.ReplaceAll(strings.TrimPrefix(ns, "kill-"), "-", "")
	cmd := exec.Command(os.Args[0], "run", dir, kc, "-n", ns, "--session", name, "--heartbeat-timeout", "2s", "--ready-timeout", "-1s")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_MAIN=1")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "1 configured") || !strings.Contains(line, "1 created") {
		cmd.Process.Kill()
		t.Fatalf("first line %q: %v\n%s", line, err, stderr.String())
	}
	cmd.Process.Kill() // SIGKILL: no chance to restore
	cmd.Wait()

	out, _, _ := run(t, "run", "list", kc)
	if !strings.Contains(out, name) {
		t.Fatalf("the killed session is not listed:\n%s", out)
	}
	if out, _, _ := run(t, "run", "cleanup", kc); strings.Contains(out, name) {
		t.Fatalf("cleanup restored a session whose heartbeat is still fresh:\n%s", out)
	}
	waitFor(t, "the session to go stale", func() bool {
		out, _, _ := run(t, "run", "list", kc)
		return strings.Contains(out, "stale")
	})
	out, errOut, code := run(t, "run", "cleanup", kc)
	if code != 0 || !strings.Contains(out, "session "+name+" ended: deleted 1 (configmap/new); restored 1 (configmap/settings)") {
		t.Fatalf("cleanup: exit %d\n%s%s", code, out, errOut)
	}
	if after := nsDump(t, ns); !reflect.DeepEqual(before, after) {
		t.Errorf("the namespace was not put back:\nbefore %v\nafter  %v", before, after)
	}
	if out, _, _ := run(t, "run", "list", kc); strings.Contains(out, name) {
		t.Errorf("still listed after cleanup:\n%s", out)
	}
}

func TestDiffCLIComparesNamespaces(t *testing.T) {
	a, b := testenv.Namespace("diffa"), testenv.Namespace("diffb")
	kc := "--kubeconfig=" + cp.Kubeconfig
	for _, ns := range []string{a, b} {
		color := "blue"
		if ns == b {
			color = "green"
		}
		set := "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: " + ns + "}\ndata: {color: " + color + "}\n"
		if _, stderr, code := run(t, "apply", writeTree(t, map[string]string{"a.yaml": set}), kc); code != 0 {
			t.Fatal(stderr)
		}
	}
	out, _, code := run(t, "diff", "-n", a, "--against", b, kc)
	if code != 1 || !strings.Contains(out, "configmap/settings differs") || !strings.Contains(out, "+  color: green") {
		t.Errorf("exit %d\n%s", code, out)
	}
	if _, _, code := run(t, "diff", "-n", a, "--against", a, kc); code != 0 {
		t.Errorf("a namespace against itself: exit %d", code)
	}
}

func TestASecondCtrlCDuringRestoreWarnsAndIsIgnored(t *testing.T) {
	var errb syncBuffer
	p := &runPrinter{out: &errb, err: &errb}
	p.stopping("interrupted")
	defer p.done()
	// Were SIGINT not caught now, it would kill the test binary.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warning", func() bool { return strings.Contains(errb.String(), "still putting the cluster back") })
}

func TestIterationLines(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 4, 5, 0, time.UTC)
	res := &cluster.Result{Changes: []cluster.Change{
		{Ref: cluster.Ref{Version: "v1", Kind: "ConfigMap", Name: "settings"}, Action: cluster.Configured},
		{Ref: cluster.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}, Action: cluster.Unchanged},
	}}
	tests := []struct {
		it   session.Iteration
		want string
	}{
		{session.Iteration{N: 2, Branch: "main", Commit: "1234567890", Result: res, Ready: true, Latency: 83 * time.Millisecond},
			"#2 10:04:05 main@1234567  1 configured, 1 unchanged: configmap/settings configured  ready  83ms"},
		{session.Iteration{N: 3, Result: res, NotReady: []cluster.Readiness{{Ref: cluster.Ref{Version: "v1", Kind: "ConfigMap", Name: "settings"}, Status: "InProgress"}}, Latency: time.Second},
			"#3 10:04:05  1 configured, 1 unchanged: configmap/settings configured  not ready yet: configmap/settings InProgress  1s"},
		{session.Iteration{N: 4, Err: errors.New("deploy/a.yaml: YAML syntax: line 3\nmore")},
			"#4 10:04:05  error: deploy/a.yaml: YAML syntax: line 3; more  (still watching: the next save retries)"},
		{session.Iteration{N: 5, Err: errors.New("cannot reach the Kubernetes API server"), Retrying: true},
			"#5 10:04:05  error: cannot reach the Kubernetes API server  (retrying every second)"},
		{session.Iteration{N: 6, Ready: true, Latency: 48 * time.Millisecond, Result: &cluster.Result{Changes: []cluster.Change{
			{Ref: cluster.Ref{Version: "v1", Kind: "ConfigMap", Name: "settings"}, Action: session.HandedBack},
			{Ref: cluster.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}, Action: cluster.Unchanged},
		}}}, "#6 10:04:05  1 handed back, 1 unchanged: configmap/settings handed back  48ms"},
		{session.Iteration{N: 7, Ready: true, Latency: 52 * time.Millisecond, Result: &cluster.Result{Changes: []cluster.Change{
			{Ref: cluster.Ref{Version: "v1", Kind: "Service", Name: "web"}, Action: cluster.Deleted},
			{Ref: cluster.Ref{Version: "v1", Kind: "ConfigMap", Name: "keep"}, Action: session.Kept, Reason: "marked kustomize.toolkit.fluxcd.io/prune: disabled, which Kustomization/flux-system/apps does not prune"},
		}}}, "#7 10:04:05  1 deleted, 1 kept: service/web deleted, configmap/keep kept (marked kustomize.toolkit.fluxcd.io/prune: disabled, which Kustomization/flux-system/apps does not prune)  ready  52ms"},
	}
	for _, tt := range tests {
		if got := formatIteration(tt.it, now); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
}

// TestRunCLIShowsWhatItPausesAndStopReportsWhatWasPutBack: a session over
// an object a Flux Kustomization owns says what it paused (the object
// only), `run list` shows it, and `run stop` from another terminal
// reports what the session put back.
func TestRunCLIShowsWhatItPausesAndStopReportsWhatWasPutBack(t *testing.T) {
	ns, fluxNS := testenv.Namespace("clipause"), testenv.Namespace("cliflux")
	kc := "--kubeconfig=" + cp.Kubeconfig
	if _, stderr, code := run(t, "apply", writeTree(t, map[string]string{"all.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: " + fluxNS + "}\n---\n" +
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: " + fluxNS + "}\nspec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: fleet}}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: " + ns + ", labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: " + fluxNS + "}}\ndata: {mode: prod}\n"}), kc); code != 0 {
		t.Fatal(stderr)
	}
	dir := writeTree(t, map[string]string{"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: dev}\n"})
	name := "p" + strings.ReplaceAll(strings.TrimPrefix(ns, "clipause-"), "-", "")
	var out, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- Run(context.Background(), Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"run", dir, kc, "-n", ns, "--session", name, "--ready-timeout", "-1s"})
	}()
	waitFor(t, "the first iteration", func() bool { return strings.Contains(out.String(), "#1 ") })
	if want := "paused Kustomization/" + fluxNS + "/apps: 1 object(s) marked kustomize.toolkit.fluxcd.io/reconcile=disabled, the rest still reconciled"; !strings.Contains(out.String(), want) {
		t.Errorf("the session does not say what it paused (%q):\n%s", want, out.String())
	}
	waitFor(t, "run list to show the pause", func() bool {
		lout, _, _ := run(t, "run", "list", kc)
		return strings.Contains(lout, name+" pauses Kustomization/"+fluxNS+"/apps: 1 object(s) marked")
	})
	sout, serr, code := run(t, "run", "stop", name, kc)
	if code != 0 || !strings.Contains(sout, "session "+name+" ended: restored 1 (configmap/settings); handed back 1 (kustomization.kustomize.toolkit.fluxcd.io/apps)") {
		t.Errorf("run stop: exit %d\n%s%s", code, sout, serr)
	}
	if code := <-done; code != 0 {
		t.Fatalf("the session exited %d\n%s", code, errb.String())
	}
}

func TestDashboardCLIServesOnLoopback(t *testing.T) {
	var out, errb syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- Run(ctx, Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, []string{"dashboard", "--kubeconfig=" + cp.Kubeconfig, "--addr", "127.0.0.1:0"})
	}()
	waitFor(t, "the dashboard's address", func() bool { return strings.Contains(errb.String(), "dashboard on http://") })
	addr := strings.Fields(strings.SplitN(errb.String(), "dashboard on ", 2)[1])[0]
	resp, err := http.Get(addr + "syncs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<h1>Syncs</h1>") {
		t.Errorf("GET /syncs: %s\n%s", resp.Status, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d\n%s", code, errb.String())
	}
}

func TestTheFirstIterationSaysWhichOwnersSettingsItApplied(t *testing.T) {
	var out bytes.Buffer
	p := &runPrinter{out: &out, err: &out}
	p.started(session.Started{Name: "dev", Mode: session.Replace, Namespace: "shop", Watching: "/src", Owner: "Kustomization flux-system/shop"})
	p.iteration(session.Iteration{N: 1, Result: &cluster.Result{}, AsOwner: "as Kustomization flux-system/shop: targetNamespace shop, 1 Secret decrypted",
		Paused: []string{"Kustomization/flux-system/shop: 1 object(s) marked"}})
	p.notice("git moved: Kustomization/flux-system/shop now deploys main@sha1:abc")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || lines[5] != "   note: git moved: Kustomization/flux-system/shop now deploys main@sha1:abc" || lines[1] != "PATH renders as Kustomization flux-system/shop applies it (--as-owner none: as it is)" ||
		lines[3] != "   as Kustomization flux-system/shop: targetNamespace shop, 1 Secret decrypted" || !strings.HasPrefix(lines[4], "   paused ") {
		t.Errorf("printed:\n%s", out.String())
	}
}
