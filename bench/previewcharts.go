package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"

	"sluice.dev/sluice/internal/synckey"
	"sluice.dev/sluice/internal/testenv"
)

// runChartPreview measures `sluice preview` of pull requests to a chart
// with generated values: n syncs of grafana as published (its admin
// password generated from the sync key, its Secrets SOPS-encrypted),
// each pull request changing a template all n render. With baseline, the
// sluice of that git revision previews the same pull requests, each
// binary with its own cache and deploy repository, the two interleaved
// (each first in turn): what masking and the checks of generated values
// cost, against the same work without them.
func runChartPreview(tb *benchTB, n, prs int, baseline string) error {
	work := tb.TempDir()
	bin, _, err := tools(work)
	if err != nil {
		return err
	}
	bins := map[string]string{"this": bin}
	names := []string{"this"}
	if baseline != "" {
		old, err := buildAt(work, baseline)
		if err != nil {
			return err
		}
		bins[baseline] = old
		names = append(names, baseline)
	}
	root, err := testenv.SourceRoot()
	if err != nil {
		return err
	}
	git := testenv.NewGitServer(tb)
	srcURL := git.CreateRepo(tb, "charts")
	w := testenv.NewWork(tb, srcURL)
	if err := os.CopyFS(filepath.Join(w.Dir, "grafana"), os.DirFS(filepath.Join(root, "internal", "render", "testdata", "charts", "grafana"))); err != nil {
		return err
	}
	w.Write(map[string]string{"README.md": "# charts\n"}).Commit("grafana")
	w.Push("main")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return err
	}
	keyFile := filepath.Join(work, "sync.key")
	if err := os.WriteFile(keyFile, []byte(synckey.New().String()+"\n"), 0o600); err != nil {
		return err
	}
	type setup struct{ syncs, cache string }
	setups := map[string]setup{}
	for _, name := range names {
		dstURL := git.CreateRepo(tb, "deploy-"+strings.ReplaceAll(name, "/", "-"))
		dir := filepath.Join(work, "syncs-"+strings.ReplaceAll(name, "/", "-"))
		os.MkdirAll(dir, 0o755)
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "---\napiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: grafana%02d}\nspec:\n  source: {repo: %s, ref: main, path: grafana}\n  render: {helm: {releaseName: grafana, namespace: team%02d}}\n  destination: {repo: %s, branch: env/dev, path: apps/grafana%02d, sops: {age: [%s]}}\n", i, srcURL, i, dstURL, i, id.Recipient())
		}
		os.WriteFile(filepath.Join(dir, "syncs.yaml"), []byte(b.String()), 0o644)
		setups[name] = setup{dir, filepath.Join(work, "cache-"+strings.ReplaceAll(name, "/", "-"))}
		m, out, err := timed("hydrate", bins[name], "hydrate", "-f", dir, "--cache-dir", setups[name].cache, "--sync-key", keyFile)
		if err != nil {
			return fmt.Errorf("%s: hydrate: %w\n%s", name, err, tail(out))
		}
		fmt.Printf("%s: %d syncs of grafana hydrated in %s\n", name, n, round(m.wall))
	}
	walls := map[string][]time.Duration{}
	cpus := map[string][]time.Duration{}
	for i := 0; i < prs; i++ {
		branch := fmt.Sprintf("pr%d", i)
		testenv.Git(tb, w.Dir, "checkout", "-q", "-b", branch, "main")
		w.Write(map[string]string{"grafana/templates/configmap-extra.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {pr: '%d'}\n", i)}).Commit(branch)
		w.Push(branch)
		testenv.Git(tb, w.Dir, "checkout", "-q", "main")
		order := names
		if i%2 == 1 && len(names) == 2 {
			order = []string{names[1], names[0]}
		}
		for _, name := range order {
			m, out, err := timed(name, bins[name], "preview", "-f", setups[name].syncs, "--cache-dir", setups[name].cache, "--sync-key", keyFile, "--base", "main", "--head", branch, "-o", "json")
			if err != nil && !strings.Contains(err.Error(), "exit status 1") {
				return fmt.Errorf("%s: preview of %s: %w\n%s", name, branch, err, tail(out))
			}
			var r struct {
				Syncs []struct{ Name, Error string }
			}
			if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &r); err != nil || len(r.Syncs) != n {
				return fmt.Errorf("%s: preview of %s reached %d syncs (want %d): %v\n%s", name, branch, len(r.Syncs), n, err, tail(out))
			}
			for _, s := range r.Syncs {
				if s.Error != "" {
					return fmt.Errorf("%s: %s: %s", name, s.Name, s.Error)
				}
			}
			walls[name], cpus[name] = append(walls[name], m.wall), append(cpus[name], m.cpu)
		}
	}
	fmt.Printf("\n| %d syncs of grafana, a template changed, p50 (p95) of %d | wall | CPU |\n|---|---:|---:|\n", n, prs)
	for _, name := range names {
		fmt.Printf("| %s | %s (%s) | %s (%s) |\n", name, percentile(walls[name], 50), percentile(walls[name], 95), percentile(cpus[name], 50), percentile(cpus[name], 95))
	}
	if len(names) == 2 {
		fmt.Printf("\nthis against %s, p50: %.3fx the wall time, %.3fx the CPU.\n", baseline,
			float64(percentile(walls[names[0]], 50))/float64(percentile(walls[names[1]], 50)),
			float64(percentile(cpus[names[0]], 50))/float64(percentile(cpus[names[1]], 50)))
	}
	return nil
}

// buildAt builds sluice and its render worker as they were at a git
// revision, from a worktree of this repository.
func buildAt(work, rev string) (string, error) {
	root, err := testenv.SourceRoot()
	if err != nil {
		return "", err
	}
	src := filepath.Join(work, "baseline-src")
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "-q", "--detach", src, rev).CombinedOutput(); err != nil {
		return "", fmt.Errorf("checking out %s: %w\n%s", rev, err, out)
	}
	defer exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run()
	out := filepath.Join(work, "baseline")
	build := exec.Command("go", "build", "-ldflags", fmt.Sprintf("-X sluice.dev/sluice/internal/sandbox.build=baseline-%d", time.Now().UnixNano()), "-o", out+"/", "./cmd/sluice", "./cmd/sluice-render")
	build.Dir, build.Stderr = src, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building sluice at %s: %w", rev, err)
	}
	return filepath.Join(out, "sluice"), nil
}
