package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

// argoClass is what Argo CD's sync makes of a manifest (argocd-manifests
// -hooks: gitops-engine's own classification).
type argoClass struct {
	ID             string   `json:"id"`
	Hook           bool     `json:"hook"`
	Phases         []string `json:"phases"`
	DeletePolicies []string `json:"deletePolicies"`
	Wave           int      `json:"wave"`
}

// argoClasses classifies an Application's manifests, by their IDs with
// the destination namespace filled in where a manifest has none (Argo
// CD's sync puts it there); phases and policies sorted (gitops-engine
// gives them in no set order).
func argoClasses(t *testing.T, app, root, ns string) map[string]argoClass {
	t.Helper()
	out := map[string]argoClass{}
	for _, line := range strings.Split(strings.TrimSpace(testenv.ArgoManifests(t, app, root, "-hooks")), "\n") {
		var c argoClass
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		sort.Strings(c.Phases)
		sort.Strings(c.DeletePolicies)
		c.ID = peerIDWithin(c.ID, ns)
		out[c.ID] = c
	}
	return out
}

// argoObjects are an Application's manifests by the same IDs, each with
// the namespace Argo CD's sync gives it.
func argoObjects(t *testing.T, app, root, ns string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for id, obj := range objectsByID(t, testenv.ArgoManifests(t, app, root)) {
		id = peerIDWithin(id, ns)
		if parts := strings.SplitN(id, "/", 3); len(parts) == 3 {
			md, _ := obj["metadata"].(map[string]any)
			md["namespace"] = parts[1]
		}
		out[id] = obj
	}
	return out
}

// The peer check for Argo CD: each public chart hydrated for Argo CD is,
// to Argo CD's own manifest generation and hook classification (from the
// argo-cd module), what the chart is: the same objects Argo CD would
// apply, field for field but for the values the chart generates at
// random, and the same hooks, in the same sync phases, with the same
// delete policies and waves. A chart's tests, which Argo CD classifies
// as hooks of no phase (so never applied), are left out of the folder.
func TestAHydratedChartIsWhatArgoCDMakesOfIt(t *testing.T) {
	chartsURL, deployURL, keyFile := publishPeerCharts(t)
	syncs, cache := t.TempDir(), t.TempDir()
	apps := map[string][2]string{} // the Applications of the chart and of the folder
	for _, ch := range peerCharts {
		ns := "ns-" + ch.name
		vals := valuesJSON(t, ch.valuesOf(t))
		// Argo CD cannot decrypt SOPS: its folders hold Secrets readable.
		y := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %s}
spec:
  source: {repo: %s, ref: main, path: charts/%s}
  render:
    helm: {releaseName: %s, namespace: %s, values: %s}
  deployer: {tool: argocd}
  destination: {repo: %s, branch: env/argo, path: apps/%s, secrets: plaintext}
`, ch.name, chartsURL, ch.name, ch.release, ns, vals, deployURL, ch.name)
		if err := os.WriteFile(filepath.Join(syncs, ch.name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		app := func(source string) string {
			return fmt.Sprintf("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: %s, namespace: argocd}\nspec:\n  project: default\n"+
				"  destination: {server: https://kubernetes.default.svc, namespace: %s}\n  source: %s\n", ch.release, ns, source)
		}
		apps[ch.name] = [2]string{
			app(fmt.Sprintf("{repoURL: %s, targetRevision: main, path: charts/%s, helm: {releaseName: %s, valuesObject: %s}}", chartsURL, ch.name, ch.release, vals)),
			app(fmt.Sprintf("{repoURL: %s, targetRevision: env/argo, path: apps/%s}", deployURL, ch.name)),
		}
	}
	if out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--sync-key", keyFile); code != 0 {
		t.Fatalf("sluice hydrate: exit %d\n%s%s", code, out, errs)
	}
	charts, deploy := filepath.Join(t.TempDir(), "charts"), filepath.Join(t.TempDir(), "deploy")
	testenv.Git(t, "", "clone", "-q", "-b", "main", chartsURL, charts)
	testenv.Git(t, "", "clone", "-q", "-b", "env/argo", deployURL, deploy)
	for _, ch := range peerCharts {
		t.Run(ch.name, func(t *testing.T) {
			ns := "ns-" + ch.name
			fromChart := argoObjects(t, apps[ch.name][0], charts, ns)
			again := argoObjects(t, apps[ch.name][0], charts, ns)
			fromFolder := argoObjects(t, apps[ch.name][1], deploy, ns)
			chartClass, folderClass := argoClasses(t, apps[ch.name][0], charts, ns), argoClasses(t, apps[ch.name][1], deploy, ns)
			// What Argo CD would apply of the chart: all but hooks of no
			// phase (its tests).
			var want, got []string
			for id, c := range chartClass {
				if !c.Hook || len(c.Phases) > 0 {
					want = append(want, id)
				}
			}
			for id := range folderClass {
				got = append(got, id)
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(want, "\n") != strings.Join(got, "\n") {
				t.Fatalf("Argo CD applies of the folder:\n%s\nof the chart:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if len(got) == 0 {
				t.Fatal("nothing to compare")
			}
			for _, id := range want {
				a, b := chartClass[id], folderClass[id]
				if a.Hook != b.Hook || strings.Join(a.Phases, ",") != strings.Join(b.Phases, ",") || strings.Join(a.DeletePolicies, ",") != strings.Join(b.DeletePolicies, ",") || a.Wave != b.Wave {
					t.Errorf("%s: Argo CD takes it from the chart as %+v, from the folder as %+v", id, a, b)
				}
				random := map[string]bool{}
				fa, fb := testenv.Fields(fromChart[id]), testenv.Fields(again[id])
				for k, v := range fa {
					if fb[k] != v {
						random[k] = true
					}
				}
				if d := objectDiff(normalize(fromChart[id], random), normalize(fromFolder[id], random)); d != "" {
					t.Errorf("%s differs (- from the chart, + from the folder):\n%s", id, d)
				}
			}
		})
	}
}
