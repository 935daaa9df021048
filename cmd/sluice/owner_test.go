package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// A folder a Flux Kustomization applies renders, and diffs, as it applies
// it: `sluice render --as-owner` (named, or found by the working tree's
// remote and path) and `sluice diff`, which finds it by itself.
func TestRenderAndDiffAsTheOwner(t *testing.T) {
	ns, fluxNS := testenv.Namespace("own"), testenv.Namespace("flux")
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	// A repository of this test's own (the control plane is shared),
	// reached over SSH by the working tree and HTTPS by Flux: the owner is
	// found all the same.
	url := "https://git.example.com/" + ns + "/fleet.git"
	w := testenv.NewWork(t, "")
	testenv.Git(t, w.Dir, "remote", "add", "origin", "git@git.example.com:"+ns+"/fleet")
	w.Write(map[string]string{
		"apps/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {domain: 'shop.${cluster_domain}', tier: '${tier:=bronze}'}\n",
	}).Commit("fleet")
	objects := `apiVersion: v1
kind: Namespace
metadata: {name: NS}
---
apiVersion: v1
kind: Namespace
metadata: {name: FLUXNS}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-vars, namespace: FLUXNS}
data: {cluster_domain: example.org}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: FLUXNS}
spec: {interval: 1m, url: URL}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: web, namespace: FLUXNS}
spec:
  interval: 1m
  prune: true
  path: ./apps/web/
  targetNamespace: NS
  namePrefix: eu-
  sourceRef: {kind: GitRepository, name: fleet}
  postBuild:
    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]
`
	createObjects(t, c.Kube(), strings.NewReplacer("FLUXNS", fluxNS, "NS", ns, "URL", url).Replace(objects))
	kc := "--kubeconfig=" + cp.Kubeconfig
	dir := filepath.Join(w.Dir, "apps", "web")

	for _, as := range []string{fluxNS + "/web", "Kustomization/" + fluxNS + "/web", "auto"} {
		out, stderr, code := run(t, "render", dir, kc, "--as-owner", as)
		if code != 0 || !strings.Contains(out, "name: eu-settings\n  namespace: "+ns) || !strings.Contains(out, "domain: shop.example.org") ||
			!strings.Contains(out, "tier: bronze") || !strings.Contains(out, "kustomize.toolkit.fluxcd.io/name: web") {
			t.Errorf("render --as-owner %s: exit %d\n%s%s", as, code, out, stderr)
		}
	}
	if out, _, code := run(t, "render", dir); code != 0 || !strings.Contains(out, "${cluster_domain}") {
		t.Errorf("render without --as-owner: exit %d\n%s", code, out)
	}
	if _, stderr, code := run(t, "render", dir, kc, "--as-owner", fluxNS+"/nope"); code != 2 || !strings.Contains(stderr, "Kustomization "+fluxNS+"/nope") {
		t.Errorf("render --as-owner of a missing Kustomization: exit %d\n%s", code, stderr)
	}

	// The real kustomize-controller applies the tree: the repository
	// served for real, the GitRepository and the working tree pointed at
	// it. diff finds the owner and says nothing would change.
	git := testenv.NewGitServer(t)
	real := git.CreateRepo(t, "fleet")
	testenv.Git(t, w.Dir, "remote", "set-url", "origin", real)
	testenv.Git(t, w.Dir, "push", "-q", "origin", "HEAD:main")
	repo := &unstructured.Unstructured{}
	repo.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	repo.SetKind("GitRepository")
	repo.SetNamespace(fluxNS)
	repo.SetName("fleet")
	patch := fmt.Appendf(nil, `{"spec":{"url":%q,"ref":{"branch":"main"}}}`, real)
	if err := c.Kube().Patch(context.Background(), repo, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	flux := testenv.StartFlux(t, cp.Kubeconfig, fluxNS)
	flux.WaitApplied(t, c.Kube(), "web", "main@sha1:"+w.Head())
	out, stderr, code := run(t, "diff", dir, kc)
	if code != 0 || !strings.Contains(stderr, "as Kustomization "+fluxNS+"/web applies it") || !strings.Contains(out, "eu-settings unchanged") {
		t.Errorf("diff of the unchanged tree: exit %d\n%s%s", code, out, stderr)
	}
	w.Write(map[string]string{"apps/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {domain: 'shop.${cluster_domain}', tier: gold}\n"})
	out, _, code = run(t, "diff", dir, kc)
	if code != 1 || !strings.Contains(out, "+  tier: gold") || strings.Contains(out, "cluster_domain") {
		t.Errorf("diff of one edit: exit %d\n%s", code, out)
	}
	if out, _, code := run(t, "diff", dir, kc, "--as-owner", "none", "-n", ns); code != 1 || !strings.Contains(out, "settings created") {
		t.Errorf("diff --as-owner none: exit %d\n%s", code, out)
	}
}

// createObjects creates the objects of a YAML stream ("---\n" between
// documents) in the cluster.
func createObjects(t *testing.T, c client.Client, stream string) {
	t.Helper()
	for _, doc := range strings.Split(stream, "---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
}
