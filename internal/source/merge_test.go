package source

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice.dev/sluice/internal/testenv"
)

// gitMergeTree is what the real git makes of merging theirs onto ours:
// the merged tree, or the files that conflict.
func gitMergeTree(t *testing.T, dir, ours, theirs string) (tree string, conflicts []string) {
	t.Helper()
	cmd := exec.Command("git", "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs)
	cmd.Dir = dir
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return lines[0], nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return "", lines[1:]
	}
	t.Fatalf("git merge-tree: %v\n%s", err, out)
	return "", nil
}

// Merges of two branches of one base, held to what git makes of them.
func TestMergeIsWhatGitMakesOfIt(t *testing.T) {
	base := map[string]string{
		"apps/a/values.yaml":           "replicas: 1\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n",
		"apps/b/values.yaml":           "replicas: 2\n",
		"apps/base/kustomization.yaml": "resources:\n- deploy.yaml\n",
		"apps/base/deploy.yaml":        "kind: Deployment\n",
		"README.md":                    "# repo\n",
	}
	tests := []struct {
		name         string
		ours, theirs map[string]string // "" removes a file
		thenTheirs   map[string]string // after theirs
		chmodTheirs  string
	}{
		{name: "different files", ours: map[string]string{"apps/b/values.yaml": "replicas: 3\n"}, theirs: map[string]string{"apps/a/values.yaml": "replicas: 5\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n"}},
		{name: "one file, lines apart", ours: map[string]string{"apps/a/values.yaml": "replicas: 2\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n"},
			theirs: map[string]string{"apps/a/values.yaml": "replicas: 1\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: false\n"}},
		{name: "one file, the same line", ours: map[string]string{"apps/a/values.yaml": "replicas: 2\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n"},
			theirs: map[string]string{"apps/a/values.yaml": "replicas: 3\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n"}},
		{name: "one file, lines next to each other", ours: map[string]string{"apps/a/values.yaml": "replicas: 2\nimage: a\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n"},
			theirs: map[string]string{"apps/a/values.yaml": "replicas: 1\nimage: b\nport: 80\nlabels:\n  team: x\nresources: {}\nend: true\n"}},
		{name: "the same change", ours: map[string]string{"apps/b/values.yaml": "replicas: 4\n"}, theirs: map[string]string{"apps/b/values.yaml": "replicas: 4\n"}},
		{name: "removed and changed", ours: map[string]string{"apps/b/values.yaml": ""}, theirs: map[string]string{"apps/b/values.yaml": "replicas: 4\n"}},
		{name: "removed on one side", ours: map[string]string{"README.md": "# the repo\n"}, theirs: map[string]string{"apps/base/deploy.yaml": "", "apps/base/kustomization.yaml": ""}},
		{name: "added on both sides", ours: map[string]string{"apps/c/values.yaml": "replicas: 1\n"}, theirs: map[string]string{"apps/c/values.yaml": "replicas: 1\n", "apps/d/x.yaml": "x: 1\n"}},
		{name: "added differently", ours: map[string]string{"apps/c/values.yaml": "replicas: 1\n"}, theirs: map[string]string{"apps/c/values.yaml": "replicas: 2\n"}},
		{name: "a file where a folder was", ours: map[string]string{"apps/b/values.yaml": "replicas: 3\n"}, theirs: map[string]string{"apps/b": ""}, thenTheirs: map[string]string{"apps/b": "now a file\n"}},
		{name: "a file where an unchanged folder was", ours: map[string]string{"README.md": "# the repo\n"}, theirs: map[string]string{"apps/b": ""}, thenTheirs: map[string]string{"apps/b": "now a file\n"}},
		{name: "executable and changed", ours: map[string]string{"apps/base/deploy.yaml": "kind: Deployment\nspec: {}\n"}, chmodTheirs: "apps/base/deploy.yaml"},
		{name: "lines added at the end on both sides", ours: map[string]string{"README.md": "# repo\nours\n"}, theirs: map[string]string{"README.md": "# repo\ntheirs\n"}},
		{name: "no final newline", ours: map[string]string{"apps/b/values.yaml": "replicas: 2"}, theirs: map[string]string{"README.md": "# repo"}},
		{name: "nothing on our side", theirs: map[string]string{"apps/b/values.yaml": "replicas: 9\n"}},
		{name: "nothing on their side", ours: map[string]string{"apps/b/values.yaml": "replicas: 9\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testenv.NewWork(t, "")
			w.Write(base).Commit("base")
			testenv.Git(t, w.Dir, "branch", "theirs")
			w.Write(tt.ours)
			ours := w.Commit("ours")
			testenv.Git(t, w.Dir, "checkout", "-q", "theirs")
			if tt.theirs != nil {
				w.Write(tt.theirs).Write(tt.thenTheirs)
			}
			if tt.chmodTheirs != "" {
				if err := os.Chmod(filepath.Join(w.Dir, tt.chmodTheirs), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			theirs := w.Commit("theirs")
			if len(tt.ours) == 0 { // ours is the base: a fast-forward
				ours = testenv.Git(t, w.Dir, "rev-parse", "main~1")
			}
			wantTree, wantConflicts := gitMergeTree(t, w.Dir, ours, theirs)

			repo, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, w.Dir), OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := repo.Merge(plumbing.NewHash(ours), plumbing.NewHash(theirs))
			var conflict *ConflictError
			switch {
			case errors.As(err, &conflict):
				if wantConflicts == nil {
					t.Fatalf("Merge: %v; git merges it into tree %s", err, wantTree)
				}
				if !sameConflicts(conflict.Paths, wantConflicts) {
					t.Errorf("conflicts in %v, git's in %v", conflict.Paths, wantConflicts)
				}
			case err != nil:
				t.Fatal(err)
			case wantConflicts != nil:
				t.Fatalf("merged into tree %s; git finds conflicts in %v", got.Tree, wantConflicts)
			case got.Tree.String() != wantTree:
				t.Errorf("merged into tree %s, git into %s", got.Tree, wantTree)
			}
			if err == nil {
				// The merge commit is the clone's: it resolves, and
				// its tree reads.
				c, err := repo.Resolve(got.Hash.String())
				if err != nil || c.Tree != got.Tree {
					t.Errorf("Resolve(the merge) = %v, %v", c, err)
				}
			}
		})
	}
}

// sameConflicts tells whether Sluice names the paths git names: where a
// file meets a folder, git names the folder's files and the file as
// "PATH~COMMIT", Sluice the path they share.
func sameConflicts(ours, gits []string) bool {
	covers := func(c, p string) bool {
		return p == c || strings.HasPrefix(p, c+"/") || strings.HasPrefix(p, c+"~")
	}
	for _, p := range gits {
		if !slices.ContainsFunc(ours, func(c string) bool { return covers(c, p) }) {
			return false
		}
	}
	for _, c := range ours {
		if !slices.ContainsFunc(gits, func(p string) bool { return covers(c, p) }) {
			return false
		}
	}
	return len(ours) > 0
}

func TestMerge3(t *testing.T) {
	tests := []struct{ base, ours, theirs, want string }{
		{"a\nb\nc\n", "A\nb\nc\n", "a\nb\nC\n", "A\nb\nC\n"},
		{"a\nb\nc\n", "a\nB\nc\n", "a\nB\nc\n", "a\nB\nc\n"},
		{"", "x\n", "x\n", "x\n"},
		{"a\nb\n", "a\nb\n", "", ""},
		{"a\nb\nc\nd\n", "a\nc\nd\n", "a\nb\nc\nd\ne\n", "a\nc\nd\ne\n"},
		{"a\nb\nc\n", "a\nX\nc\n", "a\nY\nc\n", "!"},
		{"a\n", "a\nb\n", "a\nc\n", "!"},
	}
	for _, tt := range tests {
		got, ok := Merge3([]byte(tt.base), []byte(tt.ours), []byte(tt.theirs))
		if want := tt.want != "!"; ok != want || ok && string(got) != tt.want {
			t.Errorf("Merge3(%q, %q, %q) = %q, %v; want %q", tt.base, tt.ours, tt.theirs, got, ok, tt.want)
		}
	}
}

// A pull request's head, which a regular fetch leaves out (it is no
// branch of the repository), is fetched by its ref, and merges onto the
// base in the clone.
func TestFetchRefGetsAPullRequestsHead(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"}).Commit("one")
	w.Push("main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "fork")
	head := w.Write(map[string]string{"a.yaml": "a: 2\n"}).Commit("the fork's change")
	w.Push("fork:refs/pull/7/head")
	testenv.Git(t, w.Dir, "checkout", "-q", "main")
	w.Write(map[string]string{"b.yaml": "b: 2\n"}).Commit("main moves on")
	w.Push("main")
	wantTree, _ := gitMergeTree(t, w.Dir, "main", head)

	repo, err := NewCache(t.TempDir()).Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Resolve(head); err == nil {
		t.Fatal("a regular fetch got the pull request's head: the test proves nothing")
	}
	got, err := repo.FetchRef(ctx, "refs/pull/7/head")
	if err != nil || got.String() != head {
		t.Fatalf("FetchRef = %s, %v; want %s", got, err, head)
	}
	main, err := repo.Resolve("main")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := repo.Merge(main.Hash, got)
	if err != nil || merged.Tree.String() != wantTree {
		t.Errorf("Merge = %v, %v; git's tree is %s", merged, err, wantTree)
	}
	if _, err := repo.FetchRef(ctx, "refs/pull/8/head"); !errors.Is(err, ErrNoSuchRef) {
		t.Errorf("FetchRef(no such ref) = %v", err)
	}
	for _, bad := range []string{"main", "refs/pull/7/head:refs/heads/main", "refs/../x", "refs/pull/*"} {
		if _, err := repo.FetchRef(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a full ref name") {
			t.Errorf("FetchRef(%q) = %v", bad, err)
		}
	}
}
