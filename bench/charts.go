package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/synckey"
	"sluice.dev/sluice/internal/testenv"
)

// benchCharts are the public charts vendored for the tests, with the
// values a team gives them: hooks (cert-manager, ingress-nginx), generated
// passwords and lookup (grafana, bitnami's redis), tests (podinfo).
var benchCharts = []struct{ name, chart, values string }{
	{"podinfo", "podinfo", "{}"},
	{"grafana", "grafana", "{}"},
	{"redis", "bitnami/redis", `{"master":{"persistence":{"enabled":false}},"replica":{"persistence":{"enabled":false}}}`},
	{"cert-manager", "cert-manager", `{"crds":{"enabled":true}}`},
	{"ingress", "ingress-nginx", "{}"},
}

// chartRenders measures what rendering a chart for its deployer costs:
// each chart rendered in a warm render worker as `helm template` renders
// it (random values), and with its generated values derived from a sync
// key (Options.Generate), interleaved n times; the worker's CPU.
func chartRenders(sb *sandbox.Sandbox, used *sandbox.Usage, n int) ([]string, error) {
	root, err := testenv.SourceRoot()
	if err != nil {
		return nil, err
	}
	charts := filepath.Join(root, "internal", "render", "testdata", "charts")
	fsys, err := source.Dir(charts)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	key := synckey.New()
	var lines []string
	var plainTot, keyedTot time.Duration
	for _, c := range benchCharts {
		opts := func(g *render.Generate) render.Options {
			return render.Options{Render: &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ReleaseName: c.name, Namespace: c.name, Values: rawJSON(c.values)}}, Generate: g}
		}
		var plain, keyed []float64
		objects := 0
		d := sandbox.Domain{Namespace: "bench", Source: "charts@1"}
		for i := 0; i < n; i++ {
			res, err := sb.RenderIn(context.Background(), d, fsys, c.chart, opts(nil))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.chart, err)
			}
			plain = append(plain, float64(used.CPU))
			objects = len(res.Objects)
			if _, err := sb.RenderIn(context.Background(), d, fsys, c.chart, opts(&render.Generate{Key: key.For("bench", c.name, ""), Now: key.Created})); err != nil {
				return nil, fmt.Errorf("%s: %w", c.chart, err)
			}
			keyed = append(keyed, float64(used.CPU))
		}
		p, k := time.Duration(medianOf(plain)), time.Duration(medianOf(keyed))
		plainTot, keyedTot = plainTot+p, keyedTot+k
		lines = append(lines, fmt.Sprintf("| %s (%d objects) | %s | %s | %+.1f%% |", c.chart, objects, round(p), round(k), 100*(float64(k)/float64(p)-1)))
	}
	lines = append(lines, fmt.Sprintf("| all five | %s | %s | %+.1f%% |", round(plainTot), round(keyedTot), 100*(float64(keyedTot)/float64(plainTot)-1)))
	return lines, nil
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// chartHydrations measures what a chart's hydration for its deployer
// costs: copies of the five charts hydrated by `sluice hydrate` with their
// Secrets committed readable (plaintext), and encrypted for an age
// recipient (SOPS); then each again with --force, when every Secret is
// unchanged: an encrypted one is kept as it was, encrypted no more.
func chartHydrations(bin, cache string, git *testenv.GitServer, tb *benchTB, copies int) ([]measurement, error) {
	srcURL := git.CreateRepo(tb, "charts")
	src := testenv.NewWork(tb, srcURL)
	for _, c := range benchCharts {
		src.CopyChart(tb, c.chart, "charts/"+c.name)
	}
	src.Write(map[string]string{"README.md": "# charts\n"}).Commit("charts as published")
	src.Push("main")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	work := tb.TempDir()
	keyFile := filepath.Join(work, "sync.key")
	if err := os.WriteFile(keyFile, []byte(synckey.New().String()), 0o600); err != nil {
		return nil, err
	}
	write := func(dir, dstURL, secrets string) error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for i := 0; i < copies; i++ {
			for _, c := range benchCharts {
				name := fmt.Sprintf("%s-%d", c.name, i)
				y := fmt.Sprintf("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: %s}\nspec:\n  source: {repo: %s, path: charts/%s}\n"+
					"  render: {helm: {releaseName: %s, namespace: %s, values: %s}}\n  destination: {repo: %s, branch: env/dev, path: apps/%s, %s}\n",
					name, srcURL, c.name, c.name, name, c.values, dstURL, name, secrets)
				if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(y), 0o644); err != nil {
					return err
				}
			}
		}
		return nil
	}
	plainDir, sealedDir := filepath.Join(work, "plain"), filepath.Join(work, "sealed")
	if err := write(plainDir, git.CreateRepo(tb, "deploy-charts-plain"), "secrets: plaintext"); err != nil {
		return nil, err
	}
	if err := write(sealedDir, git.CreateRepo(tb, "deploy-charts-sealed"), "sops: {age: ["+id.Recipient().String()+"]}"); err != nil {
		return nil, err
	}
	hydrate := func(name, dir string, extra ...string) (measurement, error) {
		m, out, err := timed(name, bin, append([]string{"hydrate", "-f", dir, "--cache-dir", cache, "-o", "json", "--sync-key", keyFile}, extra...)...)
		if err != nil {
			return m, fmt.Errorf("%s: %w\n%s", name, err, tail(out))
		}
		m.note = summarize(out)
		return m, nil
	}
	n := copies * len(benchCharts)
	var ms []measurement
	for _, r := range []struct {
		name, dir string
		extra     []string
	}{
		{fmt.Sprintf("(g) %d chart syncs, Secrets readable (secrets: plaintext)", n), plainDir, nil},
		{fmt.Sprintf("(g') %d chart syncs, Secrets encrypted for an age recipient", n), sealedDir, nil},
		{"(g) again, --force: every sync rendered, nothing changed", plainDir, []string{"--force"}},
		{"(g') again, --force: every sync rendered, every Secret unchanged and kept as it was", sealedDir, []string{"--force"}},
	} {
		m, err := hydrate(r.name, r.dir, r.extra...)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	ms[1].note += fmt.Sprintf("; %.2fx (g)'s CPU", float64(ms[1].cpu)/float64(ms[0].cpu))
	ms[3].note += fmt.Sprintf("; %.2fx (g)'s forced rerun's CPU", float64(ms[3].cpu)/float64(ms[2].cpu))
	if !strings.Contains(ms[3].note, "0 committed") {
		return nil, fmt.Errorf("the forced rerun committed: %s", ms[3].note)
	}
	return ms, nil
}
