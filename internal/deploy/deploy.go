// Package deploy renders a local directory and applies it to a cluster,
// or diffs it against one: what `sluice apply` and `sluice diff` do, and
// each iteration of a live session.
package deploy

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/render"
)

// Rendered is a directory rendered into objects ready for the cluster.
type Rendered struct {
	Objects []cluster.Object
	// Render is the render's result: renderer, inputs.
	Render *render.Result
	// Root is the directory the render's paths are relative to.
	Root string
}

// Render renders a local directory into cluster objects, each with the
// file it came from (relative to the directory's repository).
func Render(ctx context.Context, dir string, o render.Options) (*Rendered, error) {
	o.Origins = true
	res, root, err := render.Local(ctx, dir, o)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	objs, err := Objects(res)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	for i := range objs {
		if p := objs[i].Origin; p != "" && !filepath.IsAbs(p) {
			if rel, err := filepath.Rel(mustAbs(dir), filepath.Join(root, p)); err == nil {
				objs[i].Origin = filepath.Join(dir, rel)
			}
		}
	}
	return &Rendered{Objects: objs, Render: res, Root: root}, nil
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// Objects converts a render's YAML nodes into cluster objects.
func Objects(res *render.Result) ([]cluster.Object, error) {
	raw, err := res.JSONObjects()
	if err != nil {
		return nil, err
	}
	out := make([]cluster.Object, 0, len(raw))
	for i, data := range raw {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %w", res.Origin(i), err)
		}
		out = append(out, cluster.Object{Unstructured: u, Origin: res.Origin(i)})
	}
	return out, nil
}

// Apply renders dir and applies it.
func Apply(ctx context.Context, c *cluster.Client, dir string, ro render.Options, ao cluster.ApplyOptions) (*cluster.Result, error) {
	c.Warm()
	r, err := Render(ctx, dir, ro)
	if err != nil {
		return nil, err
	}
	return c.Apply(ctx, r.Objects, ao)
}

// Diff renders dir and diffs it against the cluster.
func Diff(ctx context.Context, c *cluster.Client, dir string, ro render.Options, do cluster.DiffOptions) (*cluster.Result, error) {
	c.Warm()
	r, err := Render(ctx, dir, ro)
	if err != nil {
		return nil, err
	}
	return c.Diff(ctx, r.Objects, do)
}
