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
// key (Options.Generate), interleaved n times; the worker's CPU, summed
// (the kernel counts it in 10 ms ticks: one render of a small chart is a
// tick or two).
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
		var plain, keyed time.Duration
		objects := 0
		d := sandbox.Domain{Namespace: "bench", Source: "charts@1"}
		once := func(g *render.Generate) (time.Duration, error) {
			res, err := sb.RenderIn(context.Background(), d, fsys, c.chart, opts(g))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", c.chart, err)
			}
			objects = len(res.Objects)
			return used.CPU, nil
		}
		gen := &render.Generate{Key: key.For("bench", c.name, ""), Now: key.Created}
		for i := 0; i < n; i++ {
			// Each first in turn: what comes first in a pair may pay for
			// the other's warm-up.
			order := []*render.Generate{nil, gen}
			if i%2 == 1 {
				order = []*render.Generate{gen, nil}
			}
			for _, g := range order {
				cpu, err := once(g)
				if err != nil {
					return nil, err
				}
				if g == nil {
					plain += cpu
				} else {
					keyed += cpu
				}
			}
		}
		p, k := plain, keyed
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
	hydrate := func(name, dir string, extra ...string) (measurement, error) {
		m, out, err := timed(name, bin, append([]string{"hydrate", "-f", dir, "--cache-dir", cache, "-o", "json", "--sync-key", keyFile}, extra...)...)
		if err != nil {
			return m, fmt.Errorf("%s: %w\n%s", name, err, tail(out))
		}
		m.note = summarize(out)
		return m, nil
	}
	n := copies * len(benchCharts)
	sealed := "sops: {age: [" + id.Recipient().String() + "]}"
	// The source's clone, made first (a dry run), is no run's.
	warm := filepath.Join(work, "warm")
	if err := write(warm, git.CreateRepo(tb, "deploy-charts-warm"), "secrets: plaintext"); err != nil {
		return nil, err
	}
	if _, out, err := timed("warm-up", bin, "hydrate", "-f", warm, "--cache-dir", cache, "--sync-key", keyFile, "--dry-run"); err != nil && !strings.Contains(out, "changed") {
		return nil, fmt.Errorf("warming up: %w\n%s", err, tail(out))
	}
	// Rounds, each into deploy repositories of its own (every sync
	// committed), each first in turn; the medians.
	const rounds = 5
	var first, again [2][]measurement // [plain, sealed]
	for r := 0; r < rounds; r++ {
		dirs := [2]string{filepath.Join(work, fmt.Sprintf("plain-%d", r)), filepath.Join(work, fmt.Sprintf("sealed-%d", r))}
		if err := write(dirs[0], git.CreateRepo(tb, fmt.Sprintf("deploy-charts-plain-%d", r)), "secrets: plaintext"); err != nil {
			return nil, err
		}
		if err := write(dirs[1], git.CreateRepo(tb, fmt.Sprintf("deploy-charts-sealed-%d", r)), sealed); err != nil {
			return nil, err
		}
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		for _, pass := range [][]string{nil, {"--force"}} {
			for _, i := range order {
				m, err := hydrate("", dirs[i], pass...)
				if err != nil {
					return nil, err
				}
				if pass == nil {
					first[i] = append(first[i], m)
				} else {
					if !strings.Contains(m.note, "0 committed") {
						return nil, fmt.Errorf("a forced rerun with nothing changed committed: %s", m.note)
					}
					again[i] = append(again[i], m)
				}
			}
		}
	}
	ms := []measurement{medianCPU(first[0]), medianCPU(first[1]), medianCPU(again[0]), medianCPU(again[1])}
	ms[0].name = fmt.Sprintf("(g) %d chart syncs, Secrets readable (secrets: plaintext), median of %d", n, rounds)
	ms[1].name = fmt.Sprintf("(g') %d chart syncs, Secrets encrypted for an age recipient (8 Secrets), median of %d", n, rounds)
	ms[2].name = "(g) again, --force: every sync rendered, nothing changed"
	ms[3].name = "(g') again, --force: every sync rendered, every Secret unchanged and kept as it was"
	ms[1].note += fmt.Sprintf("; %.2fx (g)'s CPU", float64(ms[1].cpu)/float64(ms[0].cpu))
	ms[3].note += fmt.Sprintf("; %.2fx (g)'s forced rerun's CPU", float64(ms[3].cpu)/float64(ms[2].cpu))
	return ms, nil
}

// printChartHydrations runs chartHydrations and prints its table.
func printChartHydrations(bin, cache string, git *testenv.GitServer, tb *benchTB) error {
	ms, err := chartHydrations(bin, cache, git, tb, 4)
	if err != nil {
		return err
	}
	fmt.Printf("\nPublic charts for their deployer (podinfo, grafana, bitnami redis, cert-manager, ingress-nginx, 4 copies each), with a sync key: their Secrets committed readable, and encrypted with SOPS; rounds into fresh deploy repositories, each way first in turn.\n\n")
	fmt.Println("| run | wall | CPU | peak RSS | result |")
	fmt.Println("|---|---:|---:|---:|---|")
	for _, m := range ms {
		fmt.Printf("| %s | %s | %s | %d MiB | %s |\n", m.name, round(m.wall), round(m.cpu), m.maxRS/1024, m.note)
	}
	fmt.Printf("\nTargets: encryption adds ≤ 5%% CPU to a chart's hydration ((g') against (g)); an unchanged Secret costs no encryption (the forced reruns alike).\n")
	return nil
}
