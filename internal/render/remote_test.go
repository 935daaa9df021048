package render

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// noGit puts a git first on PATH that records being run: the test fails
// if anything under it runs the git binary.
func noGit(t *testing.T) func() {
	t.Helper()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho \"$@\" >> " + marker + "\nexit 128\n"
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return func() {
		t.Helper()
		if data, err := os.ReadFile(marker); err == nil {
			t.Errorf("the git binary ran: git %s", data)
		}
	}
}

func TestRemoteBasesAndFilesAreReadInProcessNeverByGit(t *testing.T) {
	srv := testenv.NewGitServer(t)
	platform := srv.CreateRepo(t, "platform")
	w := testenv.NewWork(t, platform)
	w.Write(map[string]string{
		"bases/web/kustomization.yaml": "resources: [cm.yaml]\n",
		"bases/web/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-git}\n",
	}).Commit("base")
	w.Push("main")
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/deploy/cm.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-http}\n"))
	}))
	defer files.Close()

	dir := t.TempDir()
	write := func(name, content string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok/kustomization.yaml", "namespace: dev\nresources:\n- "+platform+"//bases/web?ref=main\n- "+files.URL+"/deploy/cm.yaml\n")
	write("gone/kustomization.yaml", "resources:\n- "+files.URL+"/deploy/missing.yaml\n")
	write("gh/kustomization.yaml", "resources:\n- gh:org/repo//deploy?ref=v1\n")
	write("local/kustomization.yaml", "resources:\n- file:///etc//\n")
	opts := Options{Bases: GitBases(source.NewCache(t.TempDir()), nil), Fetch: FetchFiles(nil)}

	ranGit := noGit(t)
	res, _, err := Local(context.Background(), filepath.Join(dir, "ok"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(objects(t, res)), " "); got != "ConfigMap/dev/from-git ConfigMap/dev/from-http" {
		t.Errorf("objects = %s", got)
	}
	if len(res.Remote) != 2 {
		t.Errorf("remote inputs = %v", res.Remote)
	}
	for _, tt := range []struct {
		dir  string
		opts Options
		want string
	}{
		// kustomize would fall back to `git clone` of a file it cannot
		// download; Sluice says what failed.
		{"gone", opts, "/deploy/missing.yaml\": GET " + files.URL + "/deploy/missing.yaml: 404"},
		{"gh", Options{}, "\"gh:org/repo//deploy?ref=v1\": remote bases are not read here"},
		{"ok", Options{}, "remote bases are not read here; vendor it into the repository"},
		{"local", opts, "a base in a source must name a remote repository"},
	} {
		if _, _, err := Local(context.Background(), filepath.Join(dir, tt.dir), tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.dir, err, tt.want)
		}
	}
	ranGit()
}
