package depcheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTracked is the largest file git may track: anything bigger is build
// output or a cache, which belongs in the git-ignored bin/ or .cache/.
const maxTracked = 5 << 20

func TestNoLargeFileIsTracked(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		p := filepath.Join(root, string(name))
		info, err := os.Lstat(p)
		if err != nil {
			continue // deleted in the working tree, not yet in the index
		}
		if info.Mode().IsRegular() && info.Size() > maxTracked {
			t.Errorf("%s is tracked and %d MiB: build output and caches do not belong in git (git rm --cached it, and ignore it)", name, info.Size()>>20)
		}
	}
}
