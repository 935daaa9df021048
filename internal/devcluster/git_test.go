package devcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// A push to a repository the server does not have creates it, as forges
// do, and a clone reads it back; a name that is not one plain path
// element creates nothing.
func TestTheGitServerCreatesARepositoryOnPush(t *testing.T) {
	s, err := ServeGit(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	work := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := git(t, work, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if out, err := git(t, work, "push", "-q", s.URL+"/app.git", "main"); err != nil {
		t.Fatalf("push to create: %v\n%s", err, out)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := git(t, "", "clone", "-q", s.URL+"/app.git", clone); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if out, _ := git(t, clone, "log", "--format=%s"); out != "first" {
		t.Fatalf("the clone holds %q, want the pushed commit", out)
	}
	for _, name := range []string{".hidden.git", "a/b.git", "%2e%2e/up.git", "noext"} {
		if out, err := git(t, work, "push", "-q", s.URL+"/"+name, "main"); err == nil {
			t.Errorf("a push to %s succeeded: %s", name, out)
		}
	}
	entries, _ := os.ReadDir(s.Root)
	if len(entries) != 1 || entries[0].Name() != "app.git" {
		t.Errorf("the server's root holds %v, want app.git alone", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.Root), "up.git")); err == nil {
		t.Error("a repository was created outside the server's root")
	}
}
