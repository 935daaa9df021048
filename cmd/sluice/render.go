package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/pin"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

type renderFlags struct {
	pin      bool
	insecure []string
}

func newRenderCmd(s Streams) *cobra.Command {
	f := &renderFlags{}
	cmd := &cobra.Command{
		Use:   "render PATH",
		Short: "Render one local directory (kustomization, chart or plain YAML) to stdout",
		Example: `  sluice render deploy/overlays/dev
  sluice render charts/shop --pin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			objs, err := renderLocal(cmd, args[0], f)
			if err != nil {
				return exit(2, err)
			}
			return writeObjects(s.Out, objs)
		},
	}
	cmd.Flags().BoolVar(&f.pin, "pin", false, "pin every image to the digest its tag points at")
	cmd.Flags().StringArrayVar(&f.insecure, "insecure-registry", nil, "registry host reached over plain HTTP (repeatable)")
	return cmd
}

// renderLocal renders a directory with the enclosing git worktree as the
// tree's root (so overlays can reach their bases), or its own root when it
// is in no repository.
func renderLocal(cmd *cobra.Command, dir string, f *renderFlags) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root := findRoot(abs)
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	fsys, err := source.Dir(root)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	reg := registry.New(registry.WithInsecure(f.insecure...))
	res, err := render.Render(cmd.Context(), fsys, filepath.ToSlash(rel), render.Options{
		ReleaseName: filepath.Base(abs), Charts: &render.Charts{Registry: reg},
	})
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	if f.pin {
		p := &pin.Pinner{Registry: reg}
		if _, err := p.Pin(cmd.Context(), res.Objects, []v1alpha1.ImageRule{{Name: "*", Strategy: v1alpha1.StrategyMutableTag}}); err != nil {
			return nil, err
		}
	}
	out := make([]string, len(res.Objects))
	for i, o := range res.Objects {
		if out[i], err = o.String(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// findRoot returns the closest directory at or above dir holding .git, or
// the filesystem root.
func findRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return d
		}
	}
}

func writeObjects(w io.Writer, objs []string) error {
	for i, o := range objs {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, o); err != nil {
			return err
		}
	}
	return nil
}
