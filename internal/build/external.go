package build

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/source"
)

// external runs an Image's builder command in its first source's root,
// with $IMAGE the reference it must push, and returns the pushed digest.
func (b *Builder) external(ctx context.Context, img config.Image, first *openedSource, ref name.Tag) (string, error) {
	dir := ""
	if first.Working() {
		dir = first.Location.Path
	} else {
		tmp, err := os.MkdirTemp("", "sluice-build-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
		if err := materialize(ctx, first.FS, tmp); err != nil {
			return "", fmt.Errorf("checking out %s for the builder: %w", first.Describe(), err)
		}
		dir = tmp
	}
	env := b.Env
	if env == nil {
		env = os.Environ()
	}
	vars := map[string]string{"IMAGE": ref.String(), "SOURCE_COMMIT": first.Commit}
	env = append(env, "IMAGE="+vars["IMAGE"], "SOURCE_COMMIT="+vars["SOURCE_COMMIT"])
	argv := make([]string, len(img.Spec.Builder.Command))
	for i, a := range img.Spec.Builder.Command {
		argv[i] = os.Expand(a, func(k string) string {
			if v, ok := vars[k]; ok {
				return v
			}
			return "$" + k
		})
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var tail bytes.Buffer
	out := io.Writer(&tail)
	if b.Log != nil {
		out = io.MultiWriter(&tail, b.Log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("spec.builder.command %s: %w\n%s", strings.Join(argv, " "), err, lastLines(tail.String(), 20))
	}
	b.Registry.Forget(ref.String())
	d, err := b.Registry.Digest(ctx, ref.String())
	if err != nil {
		return "", fmt.Errorf("spec.builder.command ran but %s was not pushed: %w", ref, err)
	}
	return d, nil
}

// materialize writes a tree's files under dir. Every path is checked to
// stay under dir before anything is written, so a tree made to climb out
// (an entry named "..", a ".git" folder with hooks) writes nothing.
func materialize(ctx context.Context, fsys source.FS, dir string) error {
	type entry struct {
		target string
		src    string
		isDir  bool
		exec   bool
	}
	var entries []entry
	err := source.Walk(ctx, fsys, ".", source.WalkOptions{Entries: maxGlobEntries}, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if source.IsGitDir(p) {
			return fmt.Errorf("%s: a .git folder in a tree is never checked out", p)
		}
		target, err := source.SecureJoin(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entries = append(entries, entry{target: target, src: p, isDir: d.IsDir(), exec: info.Mode()&0o111 != 0})
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.isDir {
			if err := os.MkdirAll(e.target, 0o755); err != nil {
				return err
			}
			continue
		}
		data, err := fsys.ReadFile(e.src)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if e.exec {
			mode = 0o755
		}
		if err := os.WriteFile(e.target, data, mode); err != nil {
			return err
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
