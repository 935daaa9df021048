// Package deploy renders a local directory and applies it to a cluster,
// or diffs it against one: what `sluice apply` and `sluice diff` do, and
// each iteration of a live session.
package deploy

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/hooks"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/synckey"
)

// Rendered is a directory rendered into objects ready for the cluster.
type Rendered struct {
	Objects []cluster.Object
	// Render is the render's result: renderer, inputs.
	Render *render.Result
	// Root is the directory the render's paths are relative to.
	Root string
	// Hooks and Warnings say what became of a chart's hooks: applied at
	// once, its tests left out, as kubectl applies them, which is not
	// Helm's order (one line per hook).
	Hooks    []v1alpha1.Hook
	Warnings []string
}

// Render renders a local directory into cluster objects, each with the
// file it came from (relative to the directory's repository).
func Render(ctx context.Context, dir string, o render.Options) (*Rendered, error) {
	o.Origins = true
	res, root, err := render.Local(ctx, dir, o)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	var layout *hooks.Layout
	if res.Renderer.Name == render.Helm {
		if res, layout, err = ForDeployer(res, hooks.Options{Tool: v1alpha1.DeployerKubectl}); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", dir, err)
		}
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
	out := &Rendered{Objects: objs, Render: res, Root: root}
	if layout != nil {
		out.Hooks, out.Warnings = layout.Hooks, layout.Warnings
	}
	return out, nil
}

// ForDeployer arranges a chart's render for the tool that applies it (see
// package hooks): its tests left out, its hooks where the tool runs them.
// The result holds the objects of the folder itself, each with its
// origin; a phased layout's phases are the layout's.
func ForDeployer(res *render.Result, o hooks.Options) (*render.Result, *hooks.Layout, error) {
	nodes, err := res.Nodes()
	if err != nil {
		return nil, nil, err
	}
	origins := map[*yaml.RNode]string{}
	for i, n := range nodes {
		origins[n] = res.Origin(i)
	}
	layout, err := hooks.Arrange(nodes, o)
	if err != nil {
		return nil, nil, err
	}
	out := *res
	out.Objects, out.JSON, out.Origins = layout.Objects, nil, nil
	if res.Origins != nil {
		for _, n := range layout.Objects {
			out.Origins = append(out.Origins, origins[n])
		}
	}
	return &out, layout, nil
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

// ForOptions say how RenderFor renders a directory for a deployer.
type ForOptions struct {
	Hooks hooks.Options
	// Key is the sync key (of the sync named Sync) generated values
	// derive from; without one, a kept object holding such values fails
	// the render, with KeyMissing.
	Key        synckey.Key
	Sync       string
	KeyMissing string
}

// RenderFor renders a local directory as a deployer would deploy it: a
// chart's tests left out, its hooks arranged for the tool (a phased
// layout's phases are in the layout), its generated values derived from
// the sync key. What is not a chart renders as it is.
func RenderFor(ctx context.Context, dir string, ro render.Options, o ForOptions) (*Rendered, error) {
	ro.Generate = &render.Generate{Now: o.Key.Created}
	if !o.Key.IsZero() {
		ro.Generate.Key = o.Key.For("", o.Sync, "")
	}
	res, root, err := render.Local(ctx, dir, ro)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	out := &Rendered{Render: res, Root: root}
	if res.Renderer.Name != render.Helm {
		return out, nil
	}
	nodes, err := res.Nodes()
	if err != nil {
		return nil, err
	}
	ns := ""
	if r := ro.Render; r != nil && r.Helm != nil {
		ns = r.Helm.Namespace
	}
	render.ReleaseNamespace(nodes, ns)
	if obj, t := hooks.Unkeyed(nodes, res.Unkeyed, o.Hooks.HelmTests); obj != nil {
		return nil, fmt.Errorf("%s %s holds values its template %s generates: %s", obj.GetKind(), obj.GetName(), t, o.KeyMissing)
	}
	res, layout, err := ForDeployer(res, o.Hooks)
	if err != nil {
		return nil, err
	}
	out.Render, out.Hooks, out.Warnings = res, layout.Hooks, layout.Warnings
	return out, nil
}
