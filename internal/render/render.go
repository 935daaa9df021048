package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime/debug"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// Renderer names.
const (
	Kustomize = "kustomize"
	Helm      = "helm"
	Plain     = "plain"
)

// Options say how to render a folder.
type Options struct {
	// Render holds the settings; nil detects the renderer from the folder.
	Render *v1alpha1.Render
	// ReleaseName is the Helm release name when the settings give none.
	ReleaseName string
	// Charts fetches remote charts; required only for render.helm.chart.
	Charts *Charts
	// CacheDir keeps local renders (Local) with the inputs they read, to
	// skip a render whose inputs did not change; empty keeps none.
	CacheDir string
	// Bases opens the remote git bases kustomizations name
	// ("https://host/org/repo//path?ref=v1"); nil refuses them.
	Bases func(ctx context.Context, url string) (*Base, error)
}

// Base is a remote kustomize base as opened: its repository's tree and
// the base's folder in it.
type Base struct {
	FS  source.FS
	Dir string
	// ID says what was read (repository and commit), for provenance.
	ID string
}

// Result is a render's output and what it read.
type Result struct {
	Renderer v1alpha1.Renderer
	Objects  []*yaml.RNode
	// JSON holds the objects as JSON instead of Objects, for a render that
	// came from the cache; Nodes gives YAML nodes either way.
	JSON []json.RawMessage
	// Origins says, for each object, the file (and line, where known) of
	// the source tree it came from, for error messages.
	Origins []string
	// Inputs are the paths read, with their hashes.
	Inputs []v1alpha1.Input
	// Chart is the remote chart rendered, if any.
	Chart *v1alpha1.PinnedChart
	// Remote lists files fetched from outside the source tree (remote
	// kustomize resources): a render that has any cannot be skipped.
	Remote []string
}

// Render renders the folder dir of fsys.
func Render(ctx context.Context, fsys source.FS, dir string, o Options) (*Result, error) {
	tr := source.Track(fsys)
	kind, err := Detect(tr, dir, o.Render)
	if err != nil {
		return nil, err
	}
	res := &Result{Renderer: v1alpha1.Renderer{Name: kind, Version: Version(kind)}}
	switch kind {
	case Kustomize:
		var s v1alpha1.KustomizeRender
		if o.Render != nil && o.Render.Kustomize != nil {
			s = *o.Render.Kustomize
		}
		res.Objects, res.Origins, err = kustomizeDir(ctx, tr, dir, s, o.Bases, &res.Remote)
	case Helm:
		s := v1alpha1.HelmRender{ReleaseName: o.ReleaseName}
		if o.Render != nil && o.Render.Helm != nil {
			s = *o.Render.Helm
			if s.ReleaseName == "" {
				s.ReleaseName = o.ReleaseName
			}
		}
		var ch *chart.Chart
		if s.Chart != nil {
			if o.Charts == nil {
				return nil, errors.New("render.helm.chart: no chart fetcher configured")
			}
			var pinned v1alpha1.PinnedChart
			ch, pinned, err = o.Charts.Fetch(ctx, *s.Chart)
			res.Chart = &pinned
		} else {
			ch, err = loadChart(tr, dir)
		}
		if err == nil {
			res.Objects, err = helmTemplate(ctx, tr, dir, ch, s)
			res.Origins = helmOrigins(res.Objects, dir, s.Chart != nil)
		}
	case Plain:
		res.Objects, res.Origins, err = plainDir(tr, dir)
	}
	if err != nil {
		return nil, err
	}
	res.Inputs = tr.Inputs()
	return res, nil
}

// Nodes returns the objects as YAML nodes.
func (r *Result) Nodes() ([]*yaml.RNode, error) {
	if r.Objects != nil || r.JSON == nil {
		return r.Objects, nil
	}
	for _, raw := range r.JSON {
		n, err := yaml.Parse(string(raw))
		if err != nil {
			return nil, err
		}
		r.Objects = append(r.Objects, n)
	}
	return r.Objects, nil
}

// JSONObjects returns the objects as JSON.
func (r *Result) JSONObjects() ([]json.RawMessage, error) {
	if r.JSON != nil {
		return r.JSON, nil
	}
	out := make([]json.RawMessage, 0, len(r.Objects))
	for _, o := range r.Objects {
		data, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, data)
	}
	return out, nil
}

// Detect decides the renderer: the settings when they name exactly one,
// else the folder: a kustomization, a Chart.yaml, or plain YAML.
func Detect(fsys fs.StatFS, dir string, r *v1alpha1.Render) (string, error) {
	if r != nil && r.Helm != nil && r.Helm.Chart != nil {
		return Helm, nil
	}
	info, err := fsys.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("path %q not found", dir)
		}
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("path %q is not a directory", dir)
	}
	if r != nil && (r.Kustomize == nil) != (r.Helm == nil) {
		if r.Kustomize != nil {
			return Kustomize, nil
		}
		return Helm, nil
	}
	for _, n := range kustomizationFiles {
		if _, err := fsys.Stat(path.Join(dir, n)); err == nil {
			return Kustomize, nil
		}
	}
	if _, err := fsys.Stat(path.Join(dir, "Chart.yaml")); err == nil {
		return Helm, nil
	}
	return Plain, nil
}

// Version is the version of a renderer's engine: the kustomize API or
// Helm SDK module Sluice was built with.
func Version(kind string) string {
	switch kind {
	case Kustomize, Helm:
		return engineVersions()[kind]
	}
	return "v1"
}

// engineVersions reads the build information once: parsing it is not
// cheap in a binary of this many modules, and every sync asks.
var engineVersions = sync.OnceValue(func() map[string]string {
	out := map[string]string{Kustomize: "unknown", Helm: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "sigs.k8s.io/kustomize/api":
				out[Kustomize] = d.Version
			case "helm.sh/helm/v3":
				out[Helm] = d.Version
			}
		}
	}
	return out
})
