package session

import (
	"os"
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
