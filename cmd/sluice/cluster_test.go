package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

// TestMain runs the tests; with SLUICE_TEST_MAIN=1 the test binary is the
// sluice command itself, for tests that need a process of their own (one
// to kill -9).
func TestMain(m *testing.M) {
	if sandbox.IsWorker(os.Args) {
		os.Exit(sandbox.WorkerMain(os.Args))
	}
	if os.Getenv("SLUICE_TEST_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
		stop()
		os.Exit(code)
	}
	testenv.RunWithControlPlane(m, &cp)
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestApplyAndDiffCLI(t *testing.T) {
	ns := testenv.Namespace("cli")
	dir := writeTree(t, map[string]string{
		"kustomization.yaml": "namespace: " + ns + "\nresources: [ns.yaml, cm.yaml]\n",
		"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n",
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: slow}\n",
	})
	kc := "--kubeconfig=" + cp.Kubeconfig
	out, stderr, code := run(t, "apply", dir, kc, "--inventory", "cli", "-n", ns)
	if code != 0 || out != "namespace/"+ns+" created\nconfigmap/settings created\n" {
		t.Fatalf("apply: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := run(t, "diff", dir, kc, "--inventory", "cli", "-n", ns); code != 0 || strings.Contains(out, "configured") {
		t.Errorf("diff after apply: exit %d\n%s", code, out)
	}
	os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: fast}\n"), 0o644)
	out, _, code = run(t, "diff", dir, kc, "--inventory", "cli", "-n", ns)
	if code != 1 || !strings.Contains(out, "configmap/settings configured") || !strings.Contains(out, "+  mode: fast") {
		t.Errorf("diff of a change: exit %d\n%s", code, out)
	}
	out, _, code = run(t, "apply", dir, kc, "--inventory", "cli", "-n", ns, "-o", "json")
	var res struct {
		Changes []struct {
			Ref    struct{ Kind, Name string }
			Action string
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Changes) != 2 || res.Changes[1].Action != "configured" {
		t.Errorf("apply -o json: exit %d\n%s", code, out)
	}
}

func TestApplyCLIBadInput(t *testing.T) {
	ns := testenv.Namespace("clibad")
	kc := "--kubeconfig=" + cp.Kubeconfig
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"yaml that does not parse", map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [x\n"}, "a.yaml"},
		{"object without kind", map[string]string{"a.yaml": "apiVersion: v1\nmetadata: {name: x}\n"}, "a.yaml: document 1 (line 1): not a Kubernetes object"},
		{"unknown kind", map[string]string{"a.yaml": "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: x}\n"}, "Gizmo/x ("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeTree(t, tt.files)
			_, stderr, code := run(t, "apply", dir, kc, "-n", ns)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, stderr, tt.want)
			}
		})
	}
	if _, stderr, code := run(t, "apply", t.TempDir(), "--kubeconfig=/nonexistent/kubeconfig"); code != 2 || !strings.Contains(stderr, "kubeconfig") {
		t.Errorf("missing kubeconfig: %d %s", code, stderr)
	}
}
