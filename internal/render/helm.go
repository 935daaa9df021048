package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// utf8BOM is dropped from the start of chart files, as helm's loader does.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// loadChart reads the chart in dir as helm's directory loader does,
// honouring its .helmignore, with the dependencies vendored under its
// charts/ folder. Every file must stay inside the chart's folder: a
// symbolic link that leads out of it is refused, naming the link.
func loadChart(ctx context.Context, fsys *guard, dir string) (*chart.Chart, error) {
	rules := ignore.Empty()
	if data, err := fsys.ReadFile(path.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, ignore.HelmIgnore), err)
		}
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	err := source.Walk(ctx, fsys, dir, source.WalkOptions{}, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if name == "" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if rules.Ignore(name, info) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err := contained(fsys, p, dir, "the chart's folder"); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		// A subchart vendored as an archive expands when the chart loads.
		if strings.HasSuffix(name, ".tgz") && path.Base(path.Dir(name)) == "charts" {
			if err := fsys.chargeArchive(p, data); err != nil {
				return err
			}
		}
		files = append(files, &archive.BufferedFile{Name: name, Data: bytes.TrimPrefix(data, utf8BOM)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", dir, err)
	}
	return ch, nil
}

// contained refuses a path whose symbolic links lead outside root.
func contained(fsys source.FS, name, root, rootName string) error {
	r, err := source.Resolve(fsys, name)
	if err != nil {
		if source.IsLinkError(err) {
			return err
		}
		return nil // the read that follows says what is wrong
	}
	if !r.Within(root) {
		if r.Link == name {
			return fmt.Errorf("%s is a symbolic link to %q (%s), outside %s %s", name, r.Target, r.Path, rootName, root)
		}
		return fmt.Errorf("%s: symbolic link %s points to %q, so the file is %s, outside %s %s", name, r.Link, r.Target, r.Path, rootName, root)
	}
	return nil
}

// helmRelease is what a chart is rendered as: `helm template`'s flags.
type helmRelease struct {
	settings v1alpha1.HelmRender
	caps     *common.Capabilities
	// valuesDir is where values files are read from: the chart's folder
	// for a local chart, the source folder for a remote one.
	valuesDir string
	limits    Limits
	// gen, if set, makes the values templates generate (see Generate).
	gen *generator
}

// helmTemplate renders a chart as `helm template` of the helm release
// binary does, in client-only mode: the release name checked, library
// charts and missing dependencies refused, values merged from the values
// files (in order) and then the inline values, validated against the
// charts' schemas, the chart's kubeVersion constraint checked, NOTES left
// out, CRDs first when asked, then manifests in Helm's install order,
// then hooks (tests included).
func helmTemplate(ctx context.Context, fsys source.FS, ch *chart.Chart, r helmRelease) ([]*yaml.RNode, int64, error) {
	s := r.settings
	if err := chartutil.ValidateReleaseName(s.ReleaseName); err != nil {
		return nil, 0, fmt.Errorf("chart %s: release name %q: %w", ch.Name(), s.ReleaseName, err)
	}
	if t := ch.Metadata.Type; t != "" && t != "application" {
		return nil, 0, fmt.Errorf("chart %s: %s charts are not installable", ch.Name(), t)
	}
	if missing := missingDependencies(ch); len(missing) > 0 {
		return nil, 0, fmt.Errorf("chart %s: found in Chart.yaml, but missing in charts/ directory: %s (vendor them with `helm dependency build`)", ch.Name(), strings.Join(missing, ", "))
	}
	vals, err := helmValues(fsys, r.valuesDir, s)
	if err != nil {
		return nil, 0, err
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, 0, fmt.Errorf("chart %s: chart dependencies processing failed: %w", ch.Name(), err)
	}
	namespace := s.Namespace
	if namespace == "" {
		namespace = "default"
	}
	opts := common.ReleaseOptions{Name: s.ReleaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	values, err := commonutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, r.caps, true)
	if err != nil {
		return nil, 0, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	if err := validateSchemas(ch, values["Values"].(common.Values)); err != nil {
		return nil, 0, fmt.Errorf("chart %s: values don't meet the specifications of the schema(s) in the following chart(s):\n%w", ch.Name(), err)
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, r.caps.KubeVersion.String()) {
		return nil, 0, fmt.Errorf("chart %s: chart requires kubeVersion: %s which is incompatible with Kubernetes %s (set render.helm.kubeVersion, or --kube-version, to the cluster's)", ch.Name(), ch.Metadata.KubeVersion, r.caps.KubeVersion.Version)
	}
	if r.gen != nil {
		markTemplates(ch, r.gen.nonce)
	}
	e := engine.Engine{CustomTemplateFuncs: boundedFuncs(ctx, r.limits, r.gen)}
	files, err := e.RenderWithContext(ctx, ch, values)
	if err != nil {
		return nil, 0, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, 0, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	var b bytes.Buffer
	if s.IncludeCRDs {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, h := range hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	if err := r.limits.checkOutput(0, int64(b.Len())); err != nil {
		return nil, 0, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	objs, err := (&parser{lim: r.limits}).parse("chart "+ch.Name(), b.Bytes())
	return objs, int64(b.Len()), err
}

// helmValues merges the values files, in order, then the inline values,
// as `helm template -f a.yaml -f b.yaml --set-json ...` would. A values
// file must stay inside the source tree.
func helmValues(fsys source.FS, dir string, s v1alpha1.HelmRender) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range s.ValuesFiles {
		p := path.Join(dir, f)
		if !fs.ValidPath(p) {
			return nil, fmt.Errorf("render.helm.valuesFiles: %s leaves the source tree", f)
		}
		if err := contained(fsys, p, ".", "the source tree"); err != nil {
			return nil, fmt.Errorf("values file %s: %w", p, err)
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", p, err)
		}
		m, err := common.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", p, err)
		}
		vals = loader.MergeMaps(vals, m)
	}
	if s.Values != nil && len(s.Values.Raw) > 0 {
		var m map[string]any
		if err := json.Unmarshal(s.Values.Raw, &m); err != nil {
			return nil, fmt.Errorf("render.helm.values: %w", err)
		}
		vals = loader.MergeMaps(vals, m)
	}
	return vals, nil
}

// missingDependencies lists the dependencies Chart.yaml declares that the
// chart's charts/ folder lacks, as helm's check does.
func missingDependencies(ch *chart.Chart) []string {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !have[d.Name] {
			missing = append(missing, d.Name)
		}
	}
	return missing
}

// helmOrigins reads each object's template from the "# Source:" comment
// Helm writes above it ("shop/charts/cache/templates/cm.yaml"), as a path
// of the source tree for a local chart.
func helmOrigins(objs []*yaml.RNode, dir string, remote bool) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		src := Source(o)
		switch {
		case src == "":
			out[i] = dir
		case remote:
			out[i] = "chart " + src
		default:
			_, rest, _ := strings.Cut(src, "/")
			out[i] = path.Join(dir, rest)
		}
	}
	return out
}

// Source is the chart template an object of a chart's render came from,
// read from the "# Source:" comment helm writes above it
// ("shop/charts/cache/templates/cm.yaml"), or "".
func Source(o *yaml.RNode) string {
	c := o.YNode().HeadComment
	if c == "" && len(o.YNode().Content) > 0 {
		c = o.YNode().Content[0].HeadComment
	}
	src := ""
	for _, line := range strings.Split(c, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			src = rest
		}
	}
	return src
}
