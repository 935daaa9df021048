package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, args)
	return out.String(), errb.String(), code
}

// cliFixture is a source repo with one overlay and an empty service repo on
// a git server.
func cliFixture(t *testing.T) (syncs string, srv *testenv.GitServer, cache string) {
	t.Helper()
	srv = testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{
		"k/kustomization.yaml": "resources: [cm.yaml]\n",
		"k/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"1\"}\n",
	}).Commit("init")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")
	syncs = t.TempDir()
	for _, name := range []string{"one", "two"} {
		y := "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: " + name + "}\nspec:\n  source: {repo: " + app + ", path: k}\n  destination: {repo: " + dst + ", branch: env/dev, path: apps/" + name + "}\n"
		os.WriteFile(filepath.Join(syncs, name+".yaml"), []byte(y), 0o644)
	}
	return syncs, srv, t.TempDir()
}

func TestHydrateCLIExitCodesAndJSON(t *testing.T) {
	syncs, _, cache := cliFixture(t)
	out, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--dry-run")
	if code != 1 || strings.Contains(stderr, "error:") || !strings.Contains(out, "one changed → ") || !strings.Contains(out, "+  name: web") {
		t.Fatalf("dry run with changes: exit %d, want 1, a diff and a line per sync, and no error\n%s%s", code, out, stderr)
	}
	out, stderr, code = run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "-o", "json")
	if code != 0 {
		t.Fatalf("hydrate: exit %d\n%s", code, stderr)
	}
	var results []map[string]any
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(results) != 2 || results[0]["name"] != "one" || results[0]["result"] != "committed" || results[0]["commit"] == "" {
		t.Errorf("json = %s", out)
	}
	out, _, code = run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "one unchanged at ") || !strings.Contains(out, "\ntwo unchanged at ") || strings.Contains(out, "---") {
		t.Errorf("dry run with nothing to change: exit %d, output %q", code, out)
	}
	out, _, code = run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--sync", "two", "-o", "json")
	if code != 0 || strings.Contains(out, `"one"`) || !strings.Contains(out, `"unchanged"`) {
		t.Errorf("--sync two: exit %d\n%s", code, out)
	}
	if _, stderr, code := run(t, "hydrate", "-f", syncs, "--sync", "nope", "--cache-dir", cache); code != 2 || !strings.Contains(stderr, "no ManifestSync named nope") {
		t.Errorf("--sync nope: exit %d %s", code, stderr)
	}
}

func TestHydrateCLIReportsEveryInvalidResourceAndPushesNothing(t *testing.T) {
	syncs, srv, cache := cliFixture(t)
	os.WriteFile(filepath.Join(syncs, "bad.yaml"), []byte("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: bad}\nspec:\n  source: {repo: x, path: k, branch: main}\n  destination: {branch: env/dev}\n"), 0o644)
	os.WriteFile(filepath.Join(syncs, "worse.yaml"), []byte("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSink\nmetadata: {name: worse}\n"), 0o644)
	before := srv.Requests.Load()
	_, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{
		"bad.yaml:5: ManifestSync bad: spec.source.branch: unknown field",
		"bad.yaml:6: ManifestSync bad: spec.destination.path: Required value",
		"worse.yaml:2: ManifestSink worse: kind: unknown kind",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if srv.Requests.Load() != before {
		t.Error("the git server was contacted although validation failed")
	}
}

func TestRenderCLI(t *testing.T) {
	out, stderr, code := run(t, "render", "../../internal/render/testdata/repo/overlays/dev")
	if code != 0 || !strings.Contains(out, "name: dev-web") || strings.Count(out, "---\n") != 3 {
		t.Errorf("render: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, stderr, code := run(t, "render", "does/not/exist"); code != 2 || !strings.Contains(stderr, "error:") {
		t.Errorf("render missing: %d %s", code, stderr)
	}
}
