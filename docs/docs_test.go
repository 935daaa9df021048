// Package docs holds Sluice's documentation; its test runs the commands
// the documentation shows.
package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// block is a fenced block of a Markdown file marked runnable (```sh
// runnable): shell commands the reader runs from the repository's root.
type block struct {
	file string
	line int
	text string
}

// runnable reads the runnable blocks of a Markdown file.
func runnable(t *testing.T, file string) []block {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(l) == "```sh runnable":
			cur = &block{file: file, line: n}
		case cur != nil && strings.TrimSpace(l) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a runnable block is not closed", file, cur.line)
	}
	return out
}

// The guides run as written: each Markdown file's runnable blocks, in
// order, in a copy of the repository's examples, with the sluice built
// from this tree on PATH; a command that fails (or a check a block makes)
// fails the test, naming the file and the block's line.
func TestTheGuidesRunAsWritten(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "examples" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/sluice", "./cmd/sluice-render")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ran := 0
	for _, file := range files {
		blocks := runnable(t, file)
		if len(blocks) == 0 {
			continue
		}
		rel, _ := filepath.Rel(root, file)
		t.Run(rel, func(t *testing.T) {
			work := t.TempDir()
			if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
				t.Fatal(err)
			}
			home := t.TempDir()
			for _, b := range blocks {
				cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+b.text)
				cmd.Dir = work
				cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
					"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "GIT_CONFIG_NOSYSTEM=1"}
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s:%d: the block fails as written: %v\n%s\n--- its output:\n%s", rel, b.line, err, b.text, out.String())
				}
				ran++
			}
		})
	}
	if ran == 0 {
		t.Fatal("no runnable block found: the guides' commands are not run")
	}
}
