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
	w, err := NewWatcher(root, 30*time.Millisecond, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(root); err != nil {
		t.Fatal(err)
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case ch := <-w.Changes():
			t.Fatalf("%s: a change was reported: %v", what, ch.Paths)
		case <-time.After(300 * time.Millisecond):
		}
	}
	change := func(what string) Change {
		t.Helper()
		select {
		case ch := <-w.Changes():
			return ch
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no change reported", what)
		}
		return Change{}
	}
	write(t, root, map[string]string{"debug.log": "x", "build/out.yaml": "x: 2\n", "deploy/notes.md": "hi", ".git/index": "x"})
	quiet("ignored files")

	// A burst of saves is one change.
	for i := 0; i < 10; i++ {
		write(t, root, map[string]string{"deploy/a.yaml": "a: " + string(rune('0'+i)) + "\n"})
	}
	ch := change("a burst of saves")
	if !slices.Equal(ch.Paths, []string{"deploy/a.yaml"}) || ch.First.IsZero() {
		t.Errorf("burst: %+v", ch)
	}
	quiet("after the burst")

	// A new directory is watched from then on.
	write(t, root, map[string]string{"deploy/new/b.yaml": "b: 1\n"})
	change("a new directory")
	for drained := false; !drained; {
		select {
		case <-w.Changes(): // the file's own event, in a burst of its own
		case <-time.After(200 * time.Millisecond):
			drained = true
		}
	}
	write(t, root, map[string]string{"deploy/new/b.yaml": "b: 2\n"})
	ch = change("a file in the new directory")
	if !slices.Contains(ch.Paths, "deploy/new/b.yaml") {
		t.Errorf("new directory: %+v", ch.Paths)
	}
}
