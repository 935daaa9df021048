package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime/debug"
	"sync"

	goyaml "go.yaml.in/yaml/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/mask"
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
	// ChartArchive, if set, gives a remote chart's archive instead of
	// Charts (a render in a worker process asks the process that has the
	// registry's credentials).
	ChartArchive func(ctx context.Context, ref v1alpha1.HelmChart) ([]byte, v1alpha1.PinnedChart, error)
	// CacheDir keeps local renders (Local) with the inputs they read, to
	// skip a render whose inputs did not change; empty keeps none.
	CacheDir string
	// Bases opens the remote git bases kustomizations name
	// ("https://host/org/repo//path?ref=v1"), see GitBases; nil refuses
	// them.
	Bases func(ctx context.Context, url string) (*Base, error)
	// Fetch reads the remote files kustomizations name (an https URL of
	// one YAML), see FetchFiles; nil refuses them.
	Fetch func(ctx context.Context, url string, max int64) ([]byte, error)
	// Egress is where the remote bases and files a source names may be
	// read from (their redirects included); nil: anywhere.
	Egress *egress.Policy
	// Capabilities are what charts are told of the cluster; the zero
	// value is `helm template`'s defaults.
	Capabilities Capabilities
	// Cluster, if set, tells the capabilities of the cluster a render is
	// for, as `helm install` reads them: asked only when a chart is
	// rendered, its version and API versions stand under the
	// KubeVersion and APIVersions of Capabilities.
	Cluster func(context.Context) (Capabilities, error)
	// IncludeCRDs renders a chart's crds/ folder too, as `helm install`
	// installs it (a sync's render.helm.includeCRDs asks the same).
	IncludeCRDs bool
	// Origins asks for each object's source file (Result.Origins). It
	// costs a kustomize build several times its CPU on large overlays, so
	// only callers that show origins ask.
	Origins bool
	// Limits bound what the render reads and produces, and its time.
	Limits Limits
	// Kustomization, if set, gives the kustomization file the folder is
	// built with, from the folder's own (nil when it has none), read
	// through fsys (bounded and recorded as the render's inputs): how a
	// GitOps tool's own settings (a Flux Kustomization's targetNamespace,
	// patches, images) are rendered with a folder. The folder is then
	// built by kustomize, whether it has a kustomization or not.
	Kustomization func(fsys source.FS, dir string, own []byte) ([]byte, error)
	// Directory, if set, is how a plain folder is read (an Argo CD
	// Application's source.directory).
	Directory *Directory
	// Read, if set, is given each file a kustomize build reads, by its
	// path in the tree, kustomization files included, and returns what
	// the build reads instead (a Flux Kustomization's SOPS-encrypted
	// secretGenerator sources and patches, decrypted).
	Read func(ctx context.Context, name string, data []byte) ([]byte, error)
	// Generate, if set, makes the values a chart's templates generate
	// (randAlphaNum, genCA, now...) the same at every render, from the
	// sync's key, and records which templates generated values and which
	// called lookup (Result.Generated, Result.Lookups): a render for a
	// deployer. Unset, they are new at each render, as `helm template`
	// makes them.
	Generate *Generate
	// PostBuild, if set, is given the rendered objects, with each one's
	// source file where Origins asked for them (else origins is empty),
	// and returns the objects the render gives (a Flux Kustomization's
	// decryption and variable substitution).
	PostBuild func(ctx context.Context, objects []*yaml.RNode, origins []string) ([]*yaml.RNode, error)
}

// Result is a render's output and what it read.
type Result struct {
	Renderer v1alpha1.Renderer
	// Objects are the objects as YAML nodes; nil until Nodes is called
	// for a render that kept its output as YAML (kustomize's) or JSON
	// (the cache's).
	Objects []*yaml.RNode
	// JSON holds the objects as JSON instead of Objects, for a render that
	// came from the cache; Nodes gives YAML nodes either way.
	JSON []json.RawMessage
	// Origins says, for each object, the file (and line, where known) of
	// the source tree it came from, for error messages; nil unless
	// Options.Origins asked.
	Origins []string
	// Inputs are the paths read, with their hashes.
	Inputs []v1alpha1.Input
	// Chart is the remote chart rendered, if any.
	Chart *v1alpha1.PinnedChart
	// Remote lists files fetched from outside the source tree (remote
	// kustomize bases and files): a render that has any cannot be skipped.
	Remote []string
	// Generated names the templates that generated values, Lookups those
	// that called lookup, Unkeyed those that generated values at random,
	// without a key (with Options.Generate only).
	Generated []v1alpha1.Generated
	Lookups   []string
	Unkeyed   []string
	// Values are the secret values the templates generated (passwords,
	// private keys), for whoever shows what the render gave to mask them
	// (mask.New(Values...)): never to be written anywhere.
	Values []mask.Value
	// yaml is the output as kustomize printed it, until it is parsed.
	yaml []byte
}

// Origin is the source file of object i, or "" when unknown.
func (r *Result) Origin(i int) string {
	if i < len(r.Origins) {
		return r.Origins[i]
	}
	return ""
}

// Render renders the folder dir of fsys within o.Limits, in this
// process: past its timeout, or when ctx ends, it returns at once (a
// kustomize build that cannot be interrupted finishes in the background,
// its result unused, which is why a controller renders in worker
// processes instead: see package sandbox).
func Render(ctx context.Context, fsys source.FS, dir string, o Options) (*Result, error) {
	lim := o.Limits.WithDefaults()
	rctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		tr := source.Track(fsys)
		res, err := render(rctx, tr, fsys, dir, o, lim)
		if err == nil {
			res.Inputs = tr.Inputs()
		}
		done <- outcome{res, err}
	}()
	select {
	case out := <-done:
		if out.err != nil && rctx.Err() != nil && ctx.Err() == nil {
			return nil, timeoutError(lim)
		}
		return out.res, out.err
	case <-rctx.Done():
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, timeoutError(lim)
	}
}

func timeoutError(lim Limits) error {
	return fmt.Errorf("%w after %s; raise the limit with %s if this is expected", ErrTimeout, lim.Timeout, FlagTimeout)
}

// RenderTracked renders as Render does, in the caller's goroutine, from
// a tree whose reads someone else records: tracked is what the render
// reads through, raw the same tree looked at without recording (sizes,
// where links lead). Inputs are left to whoever tracks; the time limit
// is the caller's to enforce (a worker process is killed past it).
func RenderTracked(ctx context.Context, tracked, raw source.FS, dir string, o Options) (*Result, error) {
	return render(ctx, tracked, raw, dir, o, o.Limits.WithDefaults())
}

func render(ctx context.Context, tr, fsys source.FS, dir string, o Options, lim Limits) (*Result, error) {
	g := newGuard(ctx, tr, fsys, lim)
	kind, err := Detect(g, dir, o.Render)
	if err != nil {
		return nil, err
	}
	if o.Kustomization != nil && kind != Helm {
		kind = Kustomize
	}
	res := &Result{Renderer: v1alpha1.Renderer{Name: kind, Version: Version(kind)}}
	var size int64
	objects := -1 // -1: as many as res.Objects holds
	switch kind {
	case Kustomize:
		kr := &kustomizeRun{bases: o.Bases, fetch: o.Fetch, egress: o.Egress, origins: o.Origins, limits: lim, generate: o.Kustomization, read: o.Read}
		if o.Render != nil && o.Render.Kustomize != nil {
			kr.settings = *o.Render.Kustomize
		}
		var out *kustomized
		if out, err = kustomizeDir(ctx, g, dir, kr); err == nil {
			res.yaml, res.Objects, res.Origins, size = out.yaml, out.objects, out.origins, int64(len(out.yaml))
			objects = out.count
		}
		res.Remote = kr.remote
	case Helm:
		s := v1alpha1.HelmRender{ReleaseName: o.ReleaseName}
		if o.Render != nil && o.Render.Helm != nil {
			s = *o.Render.Helm
			if s.ReleaseName == "" {
				s.ReleaseName = o.ReleaseName
			}
		}
		s.IncludeCRDs = s.IncludeCRDs || o.IncludeCRDs
		c, cerr := o.capabilities(ctx)
		if cerr != nil {
			return nil, cerr
		}
		caps, cerr := helmCapabilities(c, s)
		if cerr != nil {
			return nil, cerr
		}
		var ch *chart.Chart
		if s.Chart != nil {
			archive := o.ChartArchive
			if archive == nil && o.Charts != nil {
				archive = o.Charts.Archive
			}
			if archive == nil {
				return nil, errors.New("render.helm.chart: no chart fetcher configured")
			}
			var pinned v1alpha1.PinnedChart
			var data []byte
			if data, pinned, err = archive(ctx, *s.Chart); err == nil {
				res.Chart = &pinned
				ch, err = loadArchive(g, data, fmt.Sprintf("chart %s %s", s.Chart.Name, pinned.Version))
			}
		} else {
			ch, err = loadChart(ctx, g, dir)
		}
		var gen *generator
		if o.Generate != nil {
			gen = newGenerator(o.Generate)
		}
		if err == nil {
			res.Objects, size, err = helmTemplate(ctx, g, ch, helmRelease{settings: s, caps: caps, valuesDir: dir, limits: lim, gen: gen})
			if gen != nil {
				res.Generated, res.Lookups, res.Unkeyed, res.Values = gen.Generated(), gen.Lookups(), gen.Unkeyed(), gen.Values()
				// A template's fail, required or error message may hold
				// what it generated: it never leaves the render.
				if err != nil {
					err = mask.New(gen.values...).Error(err)
				}
			}
			if o.Origins {
				res.Origins = helmOrigins(res.Objects, dir, s.Chart != nil)
			}
		}
	case Plain:
		var origins []string
		res.Objects, origins, size, err = plainDir(ctx, g, dir, o.Directory)
		if o.Origins {
			res.Origins = origins
		}
	}
	if err != nil {
		return nil, err
	}
	if objects < 0 {
		objects = len(res.Objects)
	}
	if err := lim.checkOutput(objects, size); err != nil {
		return nil, err
	}
	if o.PostBuild != nil {
		nodes, err := res.Nodes()
		if err != nil {
			return nil, err
		}
		if res.Objects, err = o.PostBuild(ctx, nodes, res.Origins); err != nil {
			return nil, err
		}
		res.yaml = nil // the objects changed: the YAML is theirs now
	}
	return res, nil
}

// capabilities are the Capabilities with the cluster's filled in.
func (o *Options) capabilities(ctx context.Context) (Capabilities, error) {
	c := o.Capabilities
	if o.Cluster == nil {
		return c, nil
	}
	cl, err := o.Cluster(ctx)
	if err != nil {
		return c, fmt.Errorf("asking the cluster what a chart is told of it (or give --kube-version): %w", err)
	}
	if c.KubeVersion == "" {
		c.KubeVersion = cl.KubeVersion
	}
	c.ServerAPIVersions = cl.ServerAPIVersions
	return c, nil
}

// Nodes returns the objects as YAML nodes.
func (r *Result) Nodes() ([]*yaml.RNode, error) {
	if r.Objects != nil {
		return r.Objects, nil
	}
	if r.yaml != nil {
		objs, err := decodeNodes(r.yaml)
		if err != nil {
			return nil, err
		}
		r.Objects = objs
		return objs, nil
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

// YAML returns the objects as rendered, one stream of YAML documents: for
// a kustomization, exactly what `kustomize build` prints. Changes made to
// the nodes Nodes returned are not in it (a Result of those nodes gives
// them).
func (r *Result) YAML() ([]byte, error) {
	if r.yaml != nil {
		return r.yaml, nil
	}
	nodes, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for i, o := range nodes {
		if i > 0 {
			b.WriteString("---\n")
		}
		s, err := o.String()
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	return b.Bytes(), nil
}

// decodeNodes parses a stream of YAML documents that holds no aliases
// (kustomize's output) into nodes, one per object.
func decodeNodes(data []byte) ([]*yaml.RNode, error) {
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.RNode
	for {
		doc := &goyaml.Node{}
		if err := dec.Decode(doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(doc.Content) == 0 {
			continue
		}
		out = append(out, yaml.NewRNode(doc.Content[0]))
	}
}

// JSONObjects returns the objects as JSON.
func (r *Result) JSONObjects() ([]json.RawMessage, error) {
	if r.JSON != nil {
		return r.JSON, nil
	}
	nodes, err := r.Nodes()
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(nodes))
	for _, o := range nodes {
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
	out := map[string]string{Kustomize: "unknown", Helm: helmVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "sigs.k8s.io/kustomize/api":
				out[Kustomize] = d.Version
			}
		}
	}
	return out
})

// DecodeOutput parses the objects a render in another process gave (the
// YAML Result.YAML prints), refusing what no render of Sluice's gives:
// YAML anchors and aliases (a render's output is plain), more objects or
// deeper nesting than the limits allow.
func DecodeOutput(data []byte, lim Limits) ([]*yaml.RNode, error) {
	lim = lim.WithDefaults()
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.RNode
	for i := 1; ; i++ {
		doc := &goyaml.Node{}
		if err := dec.Decode(doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("the render's output, document %d: %w", i, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		n := doc.Content[0]
		if hasAnchors(n) {
			return nil, fmt.Errorf("the render's output, document %d: holds YAML anchors or aliases, which no render gives", i)
		}
		if d := nodeDepth(n); d > lim.Depth {
			return nil, depthError(fmt.Sprintf("the render's output, document %d", i), n.Line, d, lim.Depth)
		}
		if len(out) >= lim.Objects {
			return nil, &LimitError{What: "the objects rendered", Got: fmt.Sprintf("more than %d", lim.Objects), Max: fmt.Sprint(lim.Objects), Flag: FlagObjects}
		}
		out = append(out, yaml.NewRNode(n))
	}
}

// hasAnchors reports whether a node or one under it is an alias or
// carries an anchor.
func hasAnchors(n *goyaml.Node) bool {
	if n.Kind == goyaml.AliasNode || n.Anchor != "" {
		return true
	}
	for _, c := range n.Content {
		if hasAnchors(c) {
			return true
		}
	}
	return false
}
