package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice.dev/sluice/internal/testenv"
)

// sluiceProcess runs the test binary as the sluice command in a process of
// its own, and returns its output, exit code and peak memory.
func sluiceProcess(t *testing.T, args ...string) (stdout, stderr string, code int, maxRSS int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SLUICE_TEST_MAIN=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return out.String(), errb.String(), cmd.ProcessState.ExitCode(), ru.Maxrss << 10
}

func TestHostileYAMLFailsItsSyncInLittleMemory(t *testing.T) {
	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: NAME}\ndata: {a: b}\n"
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{
		"k/kustomization.yaml":    "resources: [cm.yaml]\n",
		"k/cm.yaml":               strings.Replace(cm, "NAME", "k", 1) + testenv.AliasBomb(10),
		"chart/Chart.yaml":        "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
		"chart/values.yaml":       testenv.AliasBomb(10),
		"chart/templates/cm.yaml": strings.Replace(cm, "NAME", "c", 1),
		"plain/cm.yaml":           strings.Replace(cm, "NAME", "p", 1) + testenv.AliasBomb(10),
		"fine/cm.yaml":            strings.Replace(cm, "NAME", "fine", 1),
	}).Commit("bombs")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")
	syncs := t.TempDir()
	for _, name := range []string{"k", "chart", "plain", "fine"} {
		y := "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: " + name + "}\nspec:\n  source: {repo: " + app + ", path: " + name + "}\n  destination: {repo: " + dst + ", branch: env/dev, path: apps/" + name + "}\n"
		os.WriteFile(filepath.Join(syncs, name+".yaml"), []byte(y), 0o644)
	}
	cache := t.TempDir()

	_, stderr, code, rss := sluiceProcess(t, "hydrate", "-f", syncs, "--cache-dir", cache)
	t.Logf("peak RSS %d MiB", rss>>20)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (some syncs failed)\n%s", code, stderr)
	}
	if rss > 500<<20 {
		t.Errorf("peak RSS %d MiB, over 500 MiB", rss>>20)
	}
	for _, want := range []string{"k/cm.yaml: document 1", "chart/values.yaml: document 1", "plain/cm.yaml: document 1", "aliases expand to more than"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if got := testenv.Git(t, filepath.Join(srv.Root, "deploy.git"), "ls-tree", "-r", "--name-only", "env/dev"); !strings.Contains(got, "apps/fine/") || strings.Contains(got, "apps/k/") {
		t.Errorf("the sound sync must land and the others not:\n%s", got)
	}

	// A bomb in the run's own files stops the run before anything starts.
	os.WriteFile(filepath.Join(syncs, "zz-bomb.yaml"), []byte("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: z}\n"+testenv.AliasBomb(10)), 0o644)
	_, stderr, code, rss = sluiceProcess(t, "hydrate", "-f", syncs, "--cache-dir", cache)
	if code != 2 || !strings.Contains(stderr, "zz-bomb.yaml") || rss > 500<<20 {
		t.Errorf("bomb in a ManifestSync file: exit %d, %d MiB\n%s", code, rss>>20, stderr)
	}
}

func TestSlowRenderTimesOutAndTheOthersLand(t *testing.T) {
	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	var big strings.Builder
	for i := 0; i < 6000; i++ {
		fmt.Fprintf(&big, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\ndata: {i: \"%d\"}\n", i, i)
	}
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{
		"big/kustomization.yaml": "namePrefix: p-\nlabels: [{pairs: {app: big}}]\nresources: [all.yaml]\n",
		"big/all.yaml":           big.String(),
		"small/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small}\n",
	}).Commit("one")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")
	syncs := t.TempDir()
	for _, name := range []string{"big", "small"} {
		y := "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: " + name + "}\nspec:\n  source: {repo: " + app + ", path: " + name + "}\n  destination: {repo: " + dst + ", branch: env/dev, path: apps/" + name + "}\n"
		os.WriteFile(filepath.Join(syncs, name+".yaml"), []byte(y), 0o644)
	}
	start := time.Now()
	// The big kustomization takes seconds; the small plain folder, a
	// millisecond.
	_, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", t.TempDir(), "--render-timeout", "500ms")
	t.Logf("run took %s", time.Since(start))
	if code != 1 || !strings.Contains(stderr, "big") || !strings.Contains(stderr, "render timed out after 500ms; raise the limit with --render-timeout") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got := testenv.Git(t, filepath.Join(srv.Root, "deploy.git"), "ls-tree", "-r", "--name-only", "env/dev"); !strings.Contains(got, "apps/small/") {
		t.Errorf("the small sync did not land:\n%s", got)
	}
}

func TestTerminatedRunEndsAtOnceLeavingTheDestinationAsItWas(t *testing.T) {
	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	var big strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&big, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\ndata: {i: \"%d\"}\n", i, i)
	}
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{
		"big/kustomization.yaml": "namePrefix: p-\nnamespace: big\nlabels: [{pairs: {app: big}, includeSelectors: true}]\nresources: [all.yaml]\n",
		"big/all.yaml":           big.String(),
	}).Commit("one")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")
	syncs := t.TempDir()
	y := "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: big}\nspec:\n  source: {repo: " + app + ", path: big}\n  destination: {repo: " + dst + ", branch: env/dev, path: apps/big}\n"
	os.WriteFile(filepath.Join(syncs, "big.yaml"), []byte(y), 0o644)

	cmd := exec.Command(os.Args[0], "hydrate", "-f", syncs, "--cache-dir", t.TempDir(), "-v")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_MAIN=1")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Stop it once the render is under way.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "msg=rendering") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	sent := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 20s after SIGTERM\n%s", stderr.String())
	}
	t.Logf("ended %s after SIGTERM, exit %d", time.Since(sent), cmd.ProcessState.ExitCode())
	if cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("a terminated run exited 0\n%s", stderr.String())
	}
	if out := testenv.Git(t, filepath.Join(srv.Root, "deploy.git"), "branch", "--list"); out != "" {
		t.Errorf("the destination changed: %s", out)
	}
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer = testenv.Buffer

// TestRemoteFilesOnTheLocalNetworkNeedTheAllowList, as a source's author
// whose kustomization names a service on the network of whoever
// hydrates it: refused, and never reached, unless --allow-remote-hosts
// names it; --no-remote-bases refuses every remote resource.
func TestRemoteFilesOnTheLocalNetworkNeedTheAllowList(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	var hits atomic.Int64
	internal := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: internal}\n")
	})}
	go internal.Serve(ln)
	t.Cleanup(func() { internal.Close() })
	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{"k/kustomization.yaml": "resources:\n- http://" + ln.Addr().String() + "/cm.yaml\n"}).Commit("a remote file")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")
	syncs := t.TempDir()
	os.WriteFile(filepath.Join(syncs, "k.yaml"), []byte("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: k}\nspec:\n  source: {repo: "+app+", path: k}\n  destination: {repo: "+dst+", branch: env/dev, path: apps/k}\n"), 0o644)
	cache := t.TempDir()

	_, stderr, code, _ := sluiceProcess(t, "hydrate", "-f", syncs, "--cache-dir", cache)
	if code != 1 || !strings.Contains(stderr, "127.0.0.2") || !strings.Contains(stderr, "refused unless --allow-remote-hosts names it") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if hits.Load() != 0 {
		t.Fatalf("the service was reached %d times", hits.Load())
	}
	_, stderr, code, _ = sluiceProcess(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--allow-remote-hosts", "127.0.0.2", "--no-remote-bases")
	if code != 1 || !strings.Contains(stderr, "remote files are refused here (--no-remote-bases)") {
		t.Fatalf("--no-remote-bases: exit %d:\n%s", code, stderr)
	}
	_, stderr, code, _ = sluiceProcess(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--allow-remote-hosts", "127.0.0.2")
	if code != 0 || hits.Load() != 1 {
		t.Fatalf("allowed: exit %d, %d requests:\n%s", code, hits.Load(), stderr)
	}
}
