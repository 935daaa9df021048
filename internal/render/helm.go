package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/ignore"
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
	if err := action.CheckDependencies(ch, ch.Metadata.Dependencies); err != nil {
		return nil, fmt.Errorf("chart %s: %w (vendor them with `helm dependency build`)", ch.Name(), err)
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
	client := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	client.DryRun = true
	client.DryRunOption = "client"
	client.ClientOnly = true
	client.Replace = true
	client.ReleaseName = s.ReleaseName
	client.Namespace = s.Namespace
	if client.Namespace == "" {
		client.Namespace = "default"
	}
	client.IncludeCRDs = s.IncludeCRDs
	if s.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(s.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("render.helm.kubeVersion: %w", err)
		}
		client.KubeVersion = kv
	}
	rel, err := client.RunWithContext(ctx, ch, vals)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	var out bytes.Buffer
	out.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		fmt.Fprintf(&out, "\n---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return ParseObjects("chart "+ch.Name(), out.Bytes())
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
