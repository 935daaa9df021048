package render

import (
	"context"
	"os"
	"path/filepath"

	"sluice.dev/sluice/internal/source"
)

// Local renders a directory of this machine as it is on disk. The tree's
// root is the enclosing git worktree (so an overlay reaches its bases), or
// the filesystem's root outside git. Paths in the result (inputs, origins)
// are relative to that root; Root says which it is.
func Local(ctx context.Context, dir string, o Options) (*Result, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	root := LocalRoot(abs)
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, "", err
	}
	fsys, err := source.Dir(root)
	if err != nil {
		return nil, "", err
	}
	defer fsys.Close()
	if o.ReleaseName == "" {
		o.ReleaseName = filepath.Base(abs)
	}
	if o.Kustomization != nil || o.PostBuild != nil || o.Directory != nil || o.Read != nil || o.Generate != nil {
		o.CacheDir = "" // what they add (the cluster's variables, keys) is no input of the tree's
	}
	var key string
	if o.CacheDir != "" {
		// The cache key holds what a chart is told of the cluster: ask
		// the cluster now, if this is a chart, rather than in the render.
		if kind, err := Detect(fsys, filepath.ToSlash(rel), o.Render); err == nil && kind == Helm && o.Cluster != nil {
			if o.Capabilities, err = o.capabilities(ctx); err != nil {
				return nil, root, err
			}
			o.Cluster = nil
		}
		key = cacheKey(abs, o)
		if res := fromCache(o.CacheDir, key, fsys); res != nil {
			return res, root, nil
		}
	}
	res, err := Render(ctx, fsys, filepath.ToSlash(rel), o)
	if err == nil && o.CacheDir != "" {
		toCache(o.CacheDir, key, res)
	}
	return res, root, err
}

// LocalRoot returns the closest directory at or above dir holding .git, or
// the filesystem root.
func LocalRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return d
		}
	}
}
