package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
)

// CopyTracked copies the folder rel of the source tree at root into
// dst/rel: the files git tracks there, as the work tree holds them (a
// change not yet committed is copied), and nothing git does not track
// (what an earlier run left, such as the quickstart's .out, is not). Out
// of a git checkout every file is copied.
func CopyTracked(t TB, root, rel, dst string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--", rel).Output()
	if err != nil {
		if err := os.CopyFS(filepath.Join(dst, rel), os.DirFS(filepath.Join(root, rel))); err != nil {
			t.Fatalf("copying %s: %v", rel, err)
		}
		return
	}
	for _, name := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		if len(name) == 0 {
			continue
		}
		from, to := filepath.Join(root, string(name)), filepath.Join(dst, string(name))
		info, err := os.Lstat(from)
		if err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatalf("copying %s: %v", name, err)
		}
		if info.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatalf("copying %s: %v", name, err)
			}
			continue
		}
		data, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, data, info.Mode().Perm())
		}
		if err != nil {
			t.Fatalf("copying %s: %v", name, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dst, rel), 0o755); err != nil {
		t.Fatalf("copying %s: %v", rel, err)
	}
}
