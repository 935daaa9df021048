package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// The folders `sluice hydrate` writes are what Flux and Argo CD apply, as
// they are: Flux's source- and kustomize-controller reconcile a
// Kustomization of the destination branch (over every folder, with no
// kustomization.yaml of Sluice's) to Ready with exactly the rendered
// objects, and Argo CD's manifest generation of one folder gives its
// objects and nothing else. Sluice's provenance record is neither's object.
func TestHydratedFoldersAreWhatFluxAndArgoCDApply(t *testing.T) {
	ns, fluxNS := testenv.Namespace("hyd"), testenv.Namespace("flux")
	srv := testenv.NewGitServer(t)
	app, dst := srv.CreateRepo(t, "app"), srv.CreateRepo(t, "deploy")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{
		"web/kustomization.yaml": "namespace: " + ns + "\nresources: [cm.yaml, svc.yaml]\n",
		"web/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {greeting: hello}\n",
		"web/svc.yaml":           "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: 80}]\n",
		"api/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api, namespace: " + ns + "}\ndata: {greeting: hi}\n",
	}).Commit("apps")
	w.Push("main")
	syncs := t.TempDir()
	for _, name := range []string{"web", "api"} {
		layout := map[string]string{"web": "perObject", "api": "single"}[name]
		y := fmt.Sprintf("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: %s}\nspec:\n  source: {repo: %s, path: %s}\n  destination: {repo: %s, branch: env/dev, path: apps/%s, layout: %s}\n", name, app, name, dst, name, layout)
		if err := os.WriteFile(filepath.Join(syncs, name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", t.TempDir()); code != 0 {
		t.Fatalf("sluice hydrate: exit %d\n%s%s", code, out, errs)
	}
	commit := testenv.Git(t, "", "ls-remote", dst, "refs/heads/env/dev")
	commit, _, _ = strings.Cut(commit, "\t")

	// Flux, over the whole branch.
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	objects := `apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: v1
kind: Namespace
metadata: {name: FLUXNS}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: deploy, namespace: FLUXNS}
spec: {interval: 1m, url: URL, ref: {branch: env/dev}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: FLUXNS}
spec:
  interval: 1m
  prune: true
  path: ./apps
  sourceRef: {kind: GitRepository, name: deploy}
`
	createObjects(t, c.Kube(), strings.NewReplacer("FLUXNS", fluxNS, "NS", ns, "URL", dst).Replace(objects))
	f := testenv.StartFlux(t, cp.Kubeconfig, fluxNS)
	k := f.WaitApplied(t, c.Kube(), "apps", "env/dev@sha1:"+commit)
	entries, _, _ := unstructured.NestedSlice(k.Object, "status", "inventory", "entries")
	var applied []string
	for _, e := range entries {
		id, _ := e.(map[string]any)["id"].(string)
		applied = append(applied, id)
	}
	want := []string{ns + "_api__ConfigMap", ns + "_web__ConfigMap", ns + "_web__Service"}
	if strings.Join(applied, " ") != strings.Join(want, " ") {
		t.Errorf("Flux applied %v, want %v", applied, want)
	}
	var cm corev1.ConfigMap
	if err := c.Kube().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, &cm); err != nil || cm.Data["greeting"] != "hello" {
		t.Errorf("the web ConfigMap Flux applied: %v %v", cm.Data, err)
	}

	// Argo CD, one folder as a directory source, and the other.
	checkout := filepath.Join(t.TempDir(), "deploy")
	testenv.Git(t, "", "clone", "-q", "-b", "env/dev", dst, checkout)
	for path, kinds := range map[string]string{"apps/web": "ConfigMap Service", "apps/api": "ConfigMap"} {
		argoApp := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web, namespace: argocd}\nspec:\n  project: default\n" +
			"  destination: {server: https://kubernetes.default.svc, namespace: " + ns + "}\n" +
			"  source: {repoURL: " + dst + ", targetRevision: env/dev, path: " + path + "}\n"
		out := testenv.ArgoManifests(t, argoApp, checkout)
		var got []string
		for id := range objectsByID(t, out) {
			kind, _, _ := strings.Cut(id, "/")
			got = append(got, kind)
		}
		slices.Sort(got)
		if strings.Join(got, " ") != kinds {
			t.Errorf("Argo CD generates from %s: %v, want %s\n%s", path, got, kinds, out)
		}
	}
}
