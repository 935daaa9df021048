package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/kio"

	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/testenv"
)

// idlePIDs are the processes of the warm workers waiting, once every
// render's worker has rested (said it is reset, or ended).
func idlePIDs(t *testing.T, s *Sandbox, want int) []int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for s.pool.idleCount() != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	var pids []int
	for _, iw := range s.pool.idle {
		pids = append(pids, iw.w.cmd.Process.Pid)
	}
	if len(pids) != want {
		t.Fatalf("%d warm workers wait, want %d", len(pids), want)
	}
	return pids
}

// kustomizeBuild is the real kustomize's output for dir of files.
func kustomizeBuild(t *testing.T, files mapFS, dir string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(testenv.KustomizeBinary(t), "build", filepath.Join(root, dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// normal is YAML as kyaml writes it, to compare two renders' objects.
func normal(t *testing.T, y string) string {
	t.Helper()
	nodes, err := kio.FromBytes([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	out, err := kio.StringAll(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAWarmWorkerServesItsDomainOnly, as two teams whose syncs render
// from one commit of a shared repository: one team's renders reuse one
// worker, each render what the real kustomize makes of its folder alone,
// even after a base that set its own OpenAPI schema (kyaml's, for the
// whole process: the worker resets it and checks before it takes the
// next render); the other team's render never runs in that worker.
func TestAWarmWorkerServesItsDomainOnly(t *testing.T) {
	files := mapFS{}
	for k, v := range tree {
		files[k] = v
	}
	// A base, not the root, sets the schema: kustomize keeps it for the
	// rest of the process.
	files["schemabase/kustomization.yaml"] = "openapi: {path: schema.json}\nresources: [../base]\n"
	files["schemabase/schema.json"] = `{"definitions": {}}`
	files["viabase/kustomization.yaml"] = "resources: [../schemabase]\npatches:\n- path: image.yaml\n"
	files["viabase/image.yaml"] = files["overlay/image.yaml"]
	var used []Usage
	s := newSandbox(t, Limits{}, func(u Usage) { used = append(used, u) })
	teamA := Domain{Namespace: "team-a", Source: "https://git.example/shared@0123"}
	teamB := Domain{Namespace: "team-b", Source: teamA.Source}

	var pid int
	for i, dir := range []string{"overlay", "viabase", "overlay", "custom", "overlay"} {
		want := kustomizeBuild(t, files, dir)
		res, err := s.RenderIn(context.Background(), teamA, files.fs(), dir, render.Options{})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		got, _ := res.YAML()
		if normal(t, string(got)) != normal(t, want) {
			t.Errorf("render %d (%s) in a warm worker:\n%s\nkustomize build:\n%s", i, dir, got, want)
		}
		pids := idlePIDs(t, s, 1)
		if i == 0 {
			pid = pids[0]
		} else if pids[0] != pid {
			t.Errorf("render %d (%s) left worker %d waiting, want the first one, %d", i, dir, pids[0], pid)
		}
	}
	if len(used) != 5 {
		t.Fatalf("%d usages observed, want one per render", len(used))
	}
	for _, u := range used {
		// Each render's own: a warm worker's start-up is not in the
		// later ones.
		if u.CPU < 0 || u.CPU > 5*time.Second || u.MaxRSS < 4<<20 || u.Killed != "" {
			t.Errorf("usage %+v", u)
		}
	}

	// Another namespace's render of the same commit: a worker of its own.
	if _, err := s.RenderIn(context.Background(), teamB, files.fs(), "overlay", render.Options{}); err != nil {
		t.Fatal(err)
	}
	pids := idlePIDs(t, s, 2)
	if pids[0] != pid || pids[1] == pid {
		t.Errorf("warm workers %v after team-b's render: want team-a's %d and another", pids, pid)
	}
	// A render with no domain (a working tree): a worker that ends.
	if _, err := s.Render(context.Background(), files.fs(), "overlay", render.Options{}); err != nil {
		t.Fatal(err)
	}
	idlePIDs(t, s, 2)
	s.Close()
	if n := workers(t); n != 0 {
		t.Errorf("%d worker processes left after Close", n)
	}
}

// TestAWarmWorkerHasEachRendersLimits, as a chart's author in a domain
// of many renders: each render has the whole CPU limit (a warm worker's
// earlier renders do not use it up), a render past it is killed and
// named so, and its worker is gone, not kept; a render that fails on its
// own (a template error) leaves its worker for the next.
func TestAWarmWorkerHasEachRendersLimits(t *testing.T) {
	var used []Usage
	s := newSandbox(t, Limits{CPU: 2 * time.Second}, func(u Usage) { used = append(used, u) })
	d := Domain{Namespace: "charts", Source: "https://git.example/charts@abcd"}
	// A tenth to half a second of CPU each, by the machine: renders
	// until their sum passes the limit by half, not one by one.
	busy := chart("{{ range 4000000 }}{{ end }}kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\n")
	var total time.Duration
	for i := 0; total < 3*time.Second; i++ {
		if i == 300 {
			t.Fatalf("%d renders took %s of CPU only", i, total)
		}
		if _, err := s.RenderIn(context.Background(), d, busy.fs(), "c", render.Options{ReleaseName: "r"}); err != nil {
			t.Fatalf("render %d, after %s of CPU in this worker: %v", i, total, err)
		}
		total += used[len(used)-1].CPU
	}
	pid := idlePIDs(t, s, 1)[0]
	// A render's own error keeps the worker.
	if _, err := s.RenderIn(context.Background(), d, chart("{{ .Values.nope.deeper }}").fs(), "c", render.Options{ReleaseName: "r"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("a template error: %v", err)
	}
	if got := idlePIDs(t, s, 1)[0]; got != pid {
		t.Errorf("after a template error, worker %d waits, want %d", got, pid)
	}
	if u := used[len(used)-1]; u.CPU > time.Second || u.Killed != "" {
		t.Errorf("the template error's usage: %+v", u)
	}
	// A loop: killed at the CPU limit, its own, and not kept.
	_, err := s.RenderIn(context.Background(), d, chart("{{ range 100000000000 }}{{ end }}").fs(), "c", render.Options{ReleaseName: "r"})
	var ke *KilledError
	if !errors.As(err, &ke) || ke.Limit != "CPU" || !strings.Contains(err.Error(), "it last read c/templates/t.yaml") {
		t.Fatalf("a loop: %v", err)
	}
	if u := used[len(used)-1]; u.Killed != "CPU" || u.CPU < time.Second || u.CPU > 4*time.Second {
		t.Errorf("the loop's usage: %+v", u)
	}
	idlePIDs(t, s, 0)
	if n := workers(t); n != 0 {
		t.Errorf("%d worker processes left", n)
	}
}

// TestAWorkerLeftRunningIsNotReused: the check between renders refuses a
// process where something of a render still runs (checked in a process
// of its own, whose goroutines are its own).
func TestAWorkerLeftRunningIsNotReused(t *testing.T) {
	out, err := exec.Command(os.Args[0], "leftover").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := "left: .*goroutines running.*\nended: \"\"\n"; !regexp.MustCompile(want).Match(out) {
		t.Errorf("the check says:\n%s\nwant %q", out, want)
	}
}

// leftover is TestAWorkerLeftRunningIsNotReused's process: a render's
// goroutine still running, then ended.
func leftover() int {
	fresh := takeWarmState()
	stop := make(chan struct{})
	go func() { <-stop }()
	fmt.Printf("left: %q\n", fresh.restore())
	close(stop)
	fmt.Printf("ended: %q\n", fresh.restore())
	return 0
}

// A render asked of a closed Sandbox fails, saying so, instead of taking
// the process down (`sluice dev cluster --serve` closed its sandbox while
// its controller still rendered, and the first render panicked).
func TestARenderAfterCloseFails(t *testing.T) {
	s := newSandbox(t, Limits{})
	t.Log(s.Isolation()) // as a controller says at start: its spawning thread runs
	s.Close()
	_, err := s.RenderIn(context.Background(), Domain{Namespace: "a", Source: "s"}, chart("kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\n").fs(), "c", render.Options{ReleaseName: "r"})
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a render after Close: %v", err)
	}
}
