package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sluice.dev/sluice/internal/testenv"
)

// mainPreview measures `sluice preview` on a monorepo: -syncs apps of one
// source repository with -history commits of history, -shared of them
// reading one base, hydrated once; then pull requests touching -touch
// apps each (-prs of them, each a new branch), and one touching the base.
// Each is previewed by the command a CI job runs, on a warm cache; the
// baseline is what CI runs without it, `sluice hydrate --dry-run` of
// every sync after the same change on main.
func mainPreview() {
	syncs := flag.Int("syncs", 500, "apps of the monorepo, one ManifestSync each")
	history := flag.Int("history", 15000, "commits of history")
	shared := flag.Int("shared", 100, "apps that read the shared base")
	touch := flag.Int("touch", 3, "apps a pull request touches")
	prs := flag.Int("prs", 10, "pull requests previewed")
	charts := flag.Int("charts", 0, "instead: this many syncs of grafana as published (generated values, Secrets SOPS-encrypted), each pull request reaching all of them")
	baseline := flag.String("baseline", "", "with -charts: a git revision whose sluice previews the same pull requests, interleaved, as the baseline")
	flag.Parse()
	tb := newTB()
	defer tb.cleanup()
	run := func() error { return runPreview(tb, *syncs, *history, *shared, *touch, *prs) }
	if *charts > 0 {
		run = func() error { return runChartPreview(tb, *charts, *prs, *baseline) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench preview:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

func runPreview(tb *benchTB, syncs, history, shared, touch, prs int) error {
	work := tb.TempDir()
	bin, _, err := tools(work)
	if err != nil {
		return err
	}
	git := testenv.NewGitServer(tb)
	srcURL, dstURL := git.CreateRepo(tb, "mono"), git.CreateRepo(tb, "deploy")
	w := testenv.NewWork(tb, srcURL)
	if err := addHistory(w.Dir, history); err != nil {
		return err
	}
	app := func(a, v int) map[string]string {
		k := "resources: [deployment.yaml, configmap.yaml]\n"
		if a < shared {
			k = "resources: [../base, deployment.yaml, configmap.yaml]\n"
		}
		return map[string]string{
			fmt.Sprintf("apps/app%03d/kustomization.yaml", a): k,
			fmt.Sprintf("apps/app%03d/deployment.yaml", a):    fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app%03d}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: app%03d}}\n  template:\n    metadata: {labels: {app: app%03d}}\n    spec:\n      containers: [{name: app, image: nginx}]\n", a, a, a),
			fmt.Sprintf("apps/app%03d/configmap.yaml", a):     fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app%03d}\ndata: {v: '%d'}\n", a, v),
		}
	}
	base := func(v int) map[string]string {
		return map[string]string{
			"apps/base/kustomization.yaml": "resources: [policy.yaml]\n",
			"apps/base/policy.yaml":        fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: team-policy}\ndata: {level: '%d'}\n", v),
		}
	}
	files := base(0)
	for a := 0; a < syncs; a++ {
		for k, v := range app(a, 0) {
			files[k] = v
		}
	}
	w.Write(files).Commit("apps")
	w.Push("main")
	d := testenv.NewWork(tb, dstURL)
	d.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	d.Push("main")
	syncDir := filepath.Join(work, "syncs")
	os.MkdirAll(syncDir, 0o755)
	var b strings.Builder
	for a := 0; a < syncs; a++ {
		fmt.Fprintf(&b, "---\napiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: app%03d}\nspec:\n  source: {repo: %s, ref: main, path: apps/app%03d}\n  destination: {repo: %s, branch: env/dev, path: apps/app%03d}\n", a, srcURL, a, dstURL, a)
	}
	os.WriteFile(filepath.Join(syncDir, "syncs.yaml"), []byte(b.String()), 0o644)
	cache := filepath.Join(work, "cache")
	m, out, err := timed("sluice hydrate, cold", bin, "hydrate", "-f", syncDir, "--cache-dir", cache)
	if err != nil {
		return fmt.Errorf("hydrate: %w\n%s", err, tail(out))
	}
	fmt.Printf("%d apps (%d reading one base), %d commits of history: hydrated in %s\n\n", syncs, shared, history, round(m.wall))

	type report struct {
		Syncs []struct {
			Name  string `json:"name"`
			Error string `json:"error"`
		} `json:"syncs"`
	}
	preview := func(name, head string) (measurement, int, error) {
		m, out, err := timed(name, bin, "preview", "-f", syncDir, "--cache-dir", cache, "--base", "main", "--head", head, "-o", "json")
		if err != nil && !strings.Contains(err.Error(), "exit status 1") {
			return m, 0, fmt.Errorf("%s: %w\n%s", name, err, tail(out))
		}
		var r report
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil {
			return m, 0, fmt.Errorf("%s: %w\n%s", name, err, tail(out))
		}
		for _, s := range r.Syncs {
			if s.Error != "" {
				return m, 0, fmt.Errorf("%s: %s: %s", name, s.Name, s.Error)
			}
		}
		return m, len(r.Syncs), nil
	}
	var walls []time.Duration
	var cpus []time.Duration
	var peak int64
	for i := 0; i < prs; i++ {
		testenv.Git(tb, w.Dir, "checkout", "-q", "-b", fmt.Sprintf("pr%d", i), "main")
		files := map[string]string{}
		for k := 0; k < touch; k++ {
			a := shared + (i*touch+k)%(syncs-shared)
			files[fmt.Sprintf("apps/app%03d/configmap.yaml", a)] = app(a, i+1)[fmt.Sprintf("apps/app%03d/configmap.yaml", a)]
		}
		w.Write(files).Commit(fmt.Sprintf("pr %d", i))
		w.Push(fmt.Sprintf("pr%d", i))
		testenv.Git(tb, w.Dir, "checkout", "-q", "main")
		m, reached, err := preview(fmt.Sprintf("preview of pr%d", i), fmt.Sprintf("pr%d", i))
		if err != nil {
			return err
		}
		if reached != touch {
			return fmt.Errorf("pr%d touches %d apps; the preview rendered %d", i, touch, reached)
		}
		walls, cpus = append(walls, m.wall), append(cpus, m.cpu)
		peak = max(peak, m.maxRS)
	}
	testenv.Git(tb, w.Dir, "checkout", "-q", "-b", "base", "main")
	w.Write(base(1)).Commit("the base")
	w.Push("base")
	testenv.Git(tb, w.Dir, "checkout", "-q", "main")
	mb, reachedBase, err := preview("preview of a base change", "base")
	if err != nil {
		return err
	}
	if reachedBase != shared {
		return fmt.Errorf("the base is read by %d apps; the preview rendered %d", shared, reachedBase)
	}

	// The baseline: the same kind of change on main, every sync's dry run.
	files = map[string]string{}
	for k := 0; k < touch; k++ {
		a := syncs - 1 - k
		files[fmt.Sprintf("apps/app%03d/configmap.yaml", a)] = app(a, 99)[fmt.Sprintf("apps/app%03d/configmap.yaml", a)]
	}
	w.Write(files).Commit("on main")
	w.Push("main")
	md, out, err := timed("sluice hydrate --dry-run", bin, "hydrate", "-f", syncDir, "--cache-dir", cache, "--dry-run")
	if err != nil && !strings.Contains(err.Error(), "exit status 1") {
		return fmt.Errorf("dry run: %w\n%s", err, tail(out))
	}

	fmt.Printf("| | wall | CPU | peak RSS |\n|---|---:|---:|---:|\n")
	fmt.Printf("| preview of a pull request touching %d apps, p50 of %d | %s | %s | %d MiB |\n", touch, prs, percentile(walls, 50), percentile(cpus, 50), peak/1024)
	fmt.Printf("| the same, p95 | %s | %s | |\n", percentile(walls, 95), percentile(cpus, 95))
	fmt.Printf("| preview of a change to the base %d apps read | %s | %s | %d MiB |\n", shared, round(mb.wall), round(mb.cpu), mb.maxRS/1024)
	fmt.Printf("| baseline: `sluice hydrate --dry-run` of all %d after %d apps changed on main | %s | %s | %d MiB |\n", syncs, touch, round(md.wall), round(md.cpu), md.maxRS/1024)
	fmt.Printf("\nEach preview rendered exactly the syncs its change reaches (%d, and %d for the base).\n", touch, shared)
	fmt.Printf("Preview p50 against the dry run: %.2fx the wall time.\n", float64(percentile(walls, 50))/float64(md.wall))
	return nil
}
