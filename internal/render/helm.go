package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/ignore"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// loadChart reads the chart in dir, honouring its .helmignore, with the
// dependencies vendored under its charts/ folder.
func loadChart(fsys source.FS, dir string) (*chart.Chart, error) {
	rules := ignore.Empty()
	if data, err := fsys.ReadFile(path.Join(dir, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, ignore.HelmIgnore), err)
		}
	}
	rules.AddDefaults()
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
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
		if d.IsDir() {
			return nil
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: name, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(files)
}

// helmTemplate renders a chart as `helm template` does: manifests and
// hooks, CRDs when asked, with values merged from the values files (in
// order) and then the inline values.
func helmTemplate(ctx context.Context, fsys source.FS, valuesDir string, ch *chart.Chart, s v1alpha1.HelmRender) ([]*yaml.RNode, error) {
	if missing := missingDependencies(ch); len(missing) > 0 {
		return nil, fmt.Errorf("chart %s: dependencies missing from its charts/ folder: %s (vendor them with `helm dependency build`)", ch.Name(), strings.Join(missing, ", "))
	}
	vals := map[string]any{}
	for _, f := range s.ValuesFiles {
		p := path.Join(valuesDir, f)
		data, err := fsys.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", p, err)
		}
		var m map[string]any
		if err := sigsyaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("values file %s: %w", p, err)
		}
		vals = mergeValues(vals, m)
	}
	if s.Values != nil && len(s.Values.Raw) > 0 {
		var m map[string]any
		if err := json.Unmarshal(s.Values.Raw, &m); err != nil {
			return nil, fmt.Errorf("render.helm.values: %w", err)
		}
		vals = mergeValues(vals, m)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	if s.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(s.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("render.helm.kubeVersion: %w", err)
		}
		caps.KubeVersion = *kv
	}
	namespace := s.Namespace
	if namespace == "" {
		namespace = "default"
	}
	out, err := template(ch, vals, s.ReleaseName, namespace, caps, s.IncludeCRDs)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	return ParseObjects("chart "+ch.Name(), out)
}

// template renders as `helm template` does, in client-only mode: the
// chart's kubeVersion constraint checked, values validated against the
// chart's schema, NOTES left out, CRDs first when asked, then manifests
// in Helm's install order, then hooks.
func template(ch *chart.Chart, vals map[string]any, release, namespace string, caps *chartutil.Capabilities, includeCRDs bool) ([]byte, error) {
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, err
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	values, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, err
	}
	var e engine.Engine
	files, err := e.Render(ch, values)
	if err != nil {
		return nil, err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if includeCRDs {
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
	return b.Bytes(), nil
}

// missingDependencies lists the dependencies Chart.yaml declares (and
// does not disable) that the chart's charts/ folder lacks.
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

// mergeValues merges b into a as Helm merges values files: maps deeply,
// everything else replaced.
func mergeValues(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(am, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}
