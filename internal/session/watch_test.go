package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestWatcherHonoursIgnoreFilesAndDebounces(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		".gitignore":           "*.log\nbuild/\n",
		"deploy/.sluiceignore": "notes.md\n",
		"deploy/a.yaml":        "a: 1\n",
		"build/out.yaml":       "x: 1\n",
	})
	os.Mkdir(filepath.Join(root, ".git"), 0o755)
	// A generous quiet time: a slow machine's burst stays one burst. What
	// is not reported is proved by what is: the next change holds only
	// the file written after.
	w, err := NewWatcher(root, 500*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(root); err != nil {
		t.Fatal(err)
	}
	change := func(what string) Change {
		t.Helper()
		select {
		case ch := <-w.Changes():
			return ch
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no change reported", what)
		}
		return Change{}
	}
	write(t, root, map[string]string{"debug.log": "x", "build/out.yaml": "x: 2\n", "deploy/notes.md": "hi", ".git/index": "x"})
	write(t, root, map[string]string{"deploy/a.yaml": "a: 0\n"})
	if ch := change("ignored files, then one that is not"); !slices.Equal(ch.Paths, []string{"deploy/a.yaml"}) {
		t.Errorf("ignored files were reported: %v", ch.Paths)
	}

	// A burst of saves is one change: the next holds only what follows.
	for i := 0; i < 10; i++ {
		write(t, root, map[string]string{"deploy/a.yaml": "a: " + string(rune('0'+i)) + "\n"})
	}
	ch := change("a burst of saves")
	if !slices.Equal(ch.Paths, []string{"deploy/a.yaml"}) || ch.First.IsZero() {
		t.Errorf("burst: %+v", ch)
	}
	write(t, root, map[string]string{"deploy/c.yaml": "c: 1\n"})
	if ch := change("a save after the burst"); !slices.Equal(ch.Paths, []string{"deploy/c.yaml"}) {
		t.Errorf("the burst went on: %v", ch.Paths)
	}

	// A new directory is watched from then on.
	write(t, root, map[string]string{"deploy/new/b.yaml": "b: 1\n"})
	change("a new directory")
	write(t, root, map[string]string{"deploy/new/b.yaml": "b: 2\n"})
	for {
		ch = change("a file in the new directory")
		if slices.Contains(ch.Paths, "deploy/new/b.yaml") && !slices.Contains(ch.Paths, "deploy/new") {
			break // the save of b.yaml in the watched directory
		}
	}
}

// While git holds the index locked (a checkout, a merge, a stash writing
// the tree), the files it writes are held back, however long it takes, and
// reported as one change once it is done: half a branch switch is never
// rendered.
func TestWatcherHoldsChangesWhileGitRewritesTheTree(t *testing.T) {
	root := t.TempDir()
	gitCmd(t, root, "init", "-q")
	tree := filepath.Join(root, "deploy")
	write(t, root, map[string]string{"deploy/a.yaml": "a: 1\n"})
	// The tree is a folder of the repository: its git directory is above.
	w, err := NewWatcher(tree, 20*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(tree); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(root, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, tree, map[string]string{"a.yaml": "a: 2\n"})
	select {
	case ch := <-w.Changes():
		t.Fatalf("a change reported while git held the index: %v", ch.Paths)
	case <-time.After(time.Second): // ten times the longest burst
	}
	write(t, tree, map[string]string{"b.yaml": "b: 1\n"})
	os.Remove(lock)
	select {
	case ch := <-w.Changes():
		if !slices.Equal(ch.Paths, []string{"a.yaml", "b.yaml"}) {
			t.Errorf("once git let go: %v, want both files in one change", ch.Paths)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no change reported once git let go of the index")
	}
}

func TestWatcherFindsTheGitDirAboveOrOfALinkedWorktree(t *testing.T) {
	root := t.TempDir()
	main := filepath.Join(root, "main")
	os.MkdirAll(filepath.Join(main, "deploy", "prod"), 0o755)
	gitCmd(t, main, "init", "-q")
	gitCmd(t, main, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "one")
	gitCmd(t, main, "worktree", "add", "-q", filepath.Join(root, "wt"))
	os.MkdirAll(filepath.Join(root, "wt", "deploy"), 0o755)
	for dir, want := range map[string]string{
		filepath.Join(main, "deploy", "prod"): filepath.Join(main, ".git"),
		filepath.Join(root, "wt", "deploy"):   filepath.Join(main, ".git", "worktrees", "wt"),
	} {
		w, err := NewWatcher(dir, time.Second, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		if w.gitDir != want {
			t.Errorf("the git directory of %s is %q, want %s", dir, w.gitDir, want)
		}
	}
}

func gitCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
