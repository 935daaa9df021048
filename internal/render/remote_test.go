package render

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sluice.dev/sluice/internal/egress"
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
		{"gh", Options{}, "\"gh:org/repo//deploy?ref=v1\": remote bases are refused here"},
		{"ok", Options{}, "remote bases are refused here (--no-remote-bases): vendor it into the repository"},
		{"local", opts, "a base in a source must name a remote repository"},
	} {
		if _, _, err := Local(context.Background(), filepath.Join(dir, tt.dir), tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.dir, err, tt.want)
		}
	}
	ranGit()
}

// TestRemoteBasesAndFilesObeyTheEgressPolicy, as a source's author who
// names an address the controller's network reaches and the Internet
// does not: a remote file or git base on a loopback, link-local or
// private address, or a redirect to one, is refused before any request
// reaches it; the allow-list lets it through.
func TestRemoteBasesAndFilesObeyTheEgressPolicy(t *testing.T) {
	var gitHits, fileHits atomic.Int64
	srv := testenv.NewGitServer(t, testenv.WithHook(func(*http.Request) { gitHits.Add(1) }))
	platform := srv.CreateRepo(t, "platform")
	w := testenv.NewWork(t, platform)
	w.Write(map[string]string{
		"bases/web/kustomization.yaml": "resources: [cm.yaml]\n",
		"bases/web/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-git}\n",
	}).Commit("base")
	w.Push("main")
	gitHits.Store(0)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fileHits.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: internal}\n"))
	}))
	defer files.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, files.URL+"/x.yaml", http.StatusFound)
	}))
	defer redirect.Close()
	_, redirectPort, _ := net.SplitHostPort(redirect.Listener.Addr().String())

	dir := t.TempDir()
	write := func(name, content string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("file/kustomization.yaml", "resources:\n- "+files.URL+"/x.yaml\n")
	write("metadata/kustomization.yaml", "resources:\n- http://169.254.169.254/latest/meta-data/x.yaml\n")
	write("base/kustomization.yaml", "resources:\n- "+platform+"//bases/web?ref=main\n")
	write("redirect/kustomization.yaml", "resources:\n- "+redirect.URL+"/x.yaml\n")
	strict, _ := egress.New(nil)
	onlyRedirector, _ := egress.New([]string{"127.0.0.1:" + redirectPort})
	opts := func(p *egress.Policy) Options {
		return Options{Bases: GitBases(source.NewCache(t.TempDir()), nil), Fetch: FetchFiles(nil), Egress: p}
	}
	for _, tt := range []struct {
		dir  string
		p    *egress.Policy
		want string
	}{
		{"file", strict, "a loopback address: refused unless --allow-remote-hosts names it"},
		{"metadata", strict, "169.254.169.254: a link-local address"},
		{"base", strict, "a loopback address"},
		{"redirect", onlyRedirector, "a loopback address"},
	} {
		_, _, err := Local(context.Background(), filepath.Join(dir, tt.dir), opts(tt.p))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.dir, err, tt.want)
		}
	}
	if gitHits.Load() != 0 || fileHits.Load() != 0 {
		t.Fatalf("refused servers were reached: git %d, files %d", gitHits.Load(), fileHits.Load())
	}
	allowed, _ := egress.New([]string{"127.0.0.1"})
	for _, d := range []string{"file", "base", "redirect"} {
		if _, _, err := Local(context.Background(), filepath.Join(dir, d), opts(allowed)); err != nil {
			t.Errorf("%s, allowed: %v", d, err)
		}
	}
}
