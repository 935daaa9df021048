package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func TestWalkFollowsLinksButNotCycles(t *testing.T) {
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{"a/x.yaml": "x\n", "b/y.yaml": "y\n", "c/z.yaml": "z\n"})
	w.Link(map[string]string{"a/to-b": "../b", "c/loop/a": ".", "c/loop/b": ".", "c/up": ".."})
	w.Commit("links")
	o, err := NewCache(t.TempDir()).OpenSource(context.Background(), w.Dir, "HEAD", "")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Dir(w.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for name, fsys := range map[string]FS{"commit": o.FS, "working tree": dir} {
		got, err := Glob(context.Background(), fsys, "a/**/*.yaml", WalkOptions{})
		if err != nil || strings.Join(got, " ") != "a/to-b/y.yaml a/x.yaml" {
			t.Errorf("%s: a link to a sibling folder: %v, %v", name, got, err)
		}
		for _, pattern := range []string{"c/**/*.yaml", "**/*.yaml"} {
			_, err := Glob(context.Background(), fsys, pattern, WalkOptions{})
			var le *LinkError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), "a cycle") {
				t.Errorf("%s: %s: %v", name, pattern, err)
			}
		}
	}
}

func TestWalkIsBoundedAndCancellable(t *testing.T) {
	w := testenv.NewWork(t, "")
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("d/f%02d.yaml", i)] = "x\n"
	}
	w.Write(files).Commit("files")
	dir, err := Dir(w.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	_, err = Glob(context.Background(), dir, "d/*.yaml", WalkOptions{Entries: 10, Flag: "--max-entries"})
	var ee *EntriesError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "raise it with --max-entries") {
		t.Errorf("over the bound: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Walk(ctx, dir, ".", WalkOptions{}, func(string, fs.DirEntry, error) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
