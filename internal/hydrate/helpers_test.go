package hydrate

import (
	"os"
	"os/exec"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func testGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return testenv.Git(t, dir, args...)
}

// testenvGitOK reports whether a git command succeeds in the bare
// destination repository.
func testenvGitOK(f *fixture, args ...string) bool {
	cmd := exec.Command("git", args...)
	cmd.Dir = f.git.Root + "/service-deploy.git"
	return cmd.Run() == nil
}

func (f *fixture) cloneDst(branch string) *testenv.Work {
	f.t.Helper()
	w := testenv.NewWork(f.t, f.dstURL)
	testenv.Git(f.t, w.Dir, "fetch", "-q", "origin", branch)
	testenv.Git(f.t, w.Dir, "checkout", "-q", "-b", branch, "FETCH_HEAD")
	return w
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
