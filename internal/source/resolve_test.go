package source

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func TestResolveFollowsLinksInsideTheTreeAndRefusesTheRest(t *testing.T) {
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{"app/base/a.yaml": "a: 1\n", "other/z": "z\n"})
	w.Link(map[string]string{
		"app/overlay/link.yaml": "../base/a.yaml",
		"app/overlay/dirlink":   "../base",
		"app/chain1":            "chain2",
		"app/chain2":            "base/a.yaml",
		"app/overlay/out.yaml":  "../../other/z",
		"app/overlay/passwd":    "/etc/passwd",
		"app/overlay/loop":      "loop",
	})
	w.Commit("links")
	repo, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, filepath.Join(w.Dir, "app")), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Tree(c)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Dir(filepath.Join(w.Dir, "app"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()

	tests := []struct {
		name     string
		want     Resolved
		wantErr  string
		linkErr  bool
		notExist bool
	}{
		{name: "base/a.yaml", want: Resolved{Path: "base/a.yaml"}},
		{name: "overlay/link.yaml", want: Resolved{Path: "base/a.yaml", Link: "overlay/link.yaml", Target: "../base/a.yaml"}},
		{name: "overlay/dirlink/a.yaml", want: Resolved{Path: "base/a.yaml", Link: "overlay/dirlink", Target: "../base"}},
		{name: "chain1", want: Resolved{Path: "base/a.yaml", Link: "chain1", Target: "chain2"}},
		{name: "overlay/out.yaml", wantErr: `overlay/out.yaml is a symbolic link to "../../other/z", which leaves the source tree`, linkErr: true},
		{name: "overlay/passwd", wantErr: `overlay/passwd is a symbolic link to "/etc/passwd", which is an absolute path, outside the source tree`, linkErr: true},
		{name: "overlay/loop", wantErr: "too many symbolic links", linkErr: true},
		{name: "overlay/missing.yaml", notExist: true},
	}
	for _, fsys := range []struct {
		kind string
		fs   FS
	}{{"tree", tree}, {"dir", dir}} {
		for _, tt := range tests {
			t.Run(fsys.kind+"/"+tt.name, func(t *testing.T) {
				got, err := Resolve(fsys.fs, tt.name)
				switch {
				case tt.notExist:
					if !errors.Is(err, fs.ErrNotExist) {
						t.Fatalf("Resolve = %+v, %v; want not found", got, err)
					}
				case tt.wantErr != "":
					var le *LinkError
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.As(err, &le) != tt.linkErr {
						t.Fatalf("Resolve = %+v, %v; want %q", got, err, tt.wantErr)
					}
				default:
					if err != nil || got != tt.want {
						t.Fatalf("Resolve = %+v, %v; want %+v", got, err, tt.want)
					}
				}
			})
		}
	}
}
