package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/devcluster"
	"sluice.dev/sluice/internal/synckey"
	"sluice.dev/sluice/internal/testenv"
)

// peerChart is a public chart, with the values a team would give it
// (on a cluster without a load balancer or a storage class).
type peerChart struct {
	name, chart, release string
	values               string // YAML, given to both the sync and the HelmRelease
	phases               bool   // its hooks run in Flux phases
}

var peerCharts = []peerChart{
	{name: "podinfo", chart: "podinfo", release: "podinfo", values: "@values-prod.yaml"},
	{name: "grafana", chart: "grafana", release: "grafana"},
	{name: "redis", chart: "bitnami/redis", release: "cache", values: "master: {persistence: {enabled: false}}\nreplica: {persistence: {enabled: false}, replicaCount: 1}\n"},
	{name: "cert-manager", chart: "cert-manager", release: "cert-manager", values: "crds: {enabled: true}\n", phases: true},
	{name: "ingress", chart: "ingress-nginx", release: "ingress", values: "controller:\n  service: {type: ClusterIP}\n", phases: true},
}

// valuesOf reads a case's values ("@FILE": a values file of the chart).
func (c peerChart) valuesOf(t *testing.T) string {
	t.Helper()
	if f, ok := strings.CutPrefix(c.values, "@"); ok {
		data, err := os.ReadFile(filepath.Join(testenv.Chart(t, c.chart), f))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	return c.values
}

// valuesJSON gives YAML values as one line of JSON, for a sync's or a
// HelmRelease's values ("{}" when there are none).
func valuesJSON(t *testing.T, values string) string {
	t.Helper()
	vals, err := yaml.YAMLToJSON([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	if string(vals) == "null" {
		return "{}"
	}
	return string(vals)
}

// publishPeerCharts pushes the charts as published to a source repository
// of a new git server and makes a deploy repository beside it and a sync
// key in a file.
func publishPeerCharts(t *testing.T) (chartsURL, deployURL, keyFile string) {
	t.Helper()
	srv := testenv.NewGitServer(t)
	chartsURL, deployURL = srv.CreateRepo(t, "charts"), srv.CreateRepo(t, "deploy")
	w := testenv.NewWork(t, chartsURL)
	for _, ch := range peerCharts {
		w.CopyChart(t, ch.chart, "charts/"+ch.name)
	}
	w.Write(map[string]string{"README.md": "# charts\n"}).Commit("charts as published")
	w.Push("main")
	keyFile = filepath.Join(t.TempDir(), "sync.key")
	if err := os.WriteFile(keyFile, []byte(synckey.New().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return chartsURL, deployURL, keyFile
}

// The peer check: each public chart, hydrated by `sluice hydrate` for
// Flux and applied by the real kustomize-controller, converges to the
// objects the real helm-controller installs from the chart with the same
// values, field for field (Helm's release Secret aside, and the values the
// chart generates at random, which two runs of the helm binary itself do
// not agree on); its Secrets, committed SOPS-encrypted, are decrypted by
// kustomize-controller with a real age key; its hooks run in Helm's
// order; and what kustomize-controller keeps that Helm deletes is exactly
// what the record says. No container runs here: a kubelet of the test's
// reports pods run (a hook Job's pod succeeded), and the real workload
// controllers do the rest. Then a change to a hook Job is hydrated and
// applied cleanly (kustomize-controller re-creates it).
func TestAHydratedChartIsWhatHelmControllerInstalls(t *testing.T) {
	if testing.Short() {
		t.Skip("a control plane of its own, the Flux controllers and five charts: minutes")
	}
	ctx := context.Background()
	pc, err := devcluster.Start(ctx, devcluster.Options{Dir: t.TempDir(),
		Controllers: []string{"serviceaccount", "deployment", "replicaset", "statefulset", "daemonset", "job", "ttl-after-finished"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Stop() })
	c, err := client.New(pc.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fluxNS := testenv.Namespace("flux")
	namespaces := map[string]string{fluxNS: fluxNS}
	for _, ch := range peerCharts {
		namespaces[ch.name] = testenv.Namespace(ch.name)
	}
	for _, ns := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.StartKubelet(t, pc.Config)
	flux := testenv.StartFluxLogging(t, pc.Kubeconfig, fluxNS, "info")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Flux's logs:\n%s", flux.Logs(60))
		}
	})

	// The charts as published, in a source repository; a deploy
	// repository Sluice hydrates into.
	chartsURL, deployURL, keyFile := publishPeerCharts(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	syncs, cache := t.TempDir(), t.TempDir()
	writeSync := func(ch peerChart, values string) {
		vals := valuesJSON(t, values)
		deployer := ""
		if ch.phases {
			deployer = fmt.Sprintf("  deployer:\n    flux:\n      sourceRef: {name: deploy, namespace: %s}\n      interval: 1m\n      timeout: 2m\n      decryptionSecretRef: {name: sops-age}\n", fluxNS)
		}
		y := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %s}
spec:
  source: {repo: %s, ref: main, path: charts/%s}
  render:
    helm: {releaseName: %s, namespace: %s, values: %s}
%s  destination:
    repo: %s
    branch: env/dev
    path: apps/%s
    sops: {age: [%s]}
`, ch.name, chartsURL, ch.name, ch.release, namespaces[ch.name], vals, deployer, deployURL, ch.name, id.Recipient())
		if err := os.WriteFile(filepath.Join(syncs, ch.name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range peerCharts {
		writeSync(ch, ch.valuesOf(t))
	}
	if out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--sync-key", keyFile); code != 0 {
		t.Fatalf("sluice hydrate: exit %d\n%s%s", code, out, errs)
	}
	commit := strings.Fields(testenv.Git(t, "", "ls-remote", deployURL, "refs/heads/env/dev"))[0]

	// What each chart holds, by the reference helm binary (tests
	// included), and the paths its random values take.
	refs := map[string]*peerReference{}
	for _, ch := range peerCharts {
		refs[ch.name] = reference(t, ch, namespaces[ch.name])
	}

	// helm-controller installs each chart.
	apply := func(docs string) {
		t.Helper()
		for _, doc := range strings.Split(docs, "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			if err := c.Create(ctx, u); err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
		}
	}
	apply(fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: charts, namespace: %s}\nspec: {interval: 1m, url: %s, ref: {branch: main}}", fluxNS, chartsURL))
	for _, ch := range peerCharts {
		vals := valuesJSON(t, ch.valuesOf(t))
		apply(fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: %s, namespace: %s}
spec:
  interval: 10m
  timeout: 3m
  releaseName: %s
  targetNamespace: %s
  chart:
    spec:
      chart: ./charts/%s
      sourceRef: {kind: GitRepository, name: charts}
  install: {crds: CreateReplace}
  values: %s`, ch.name, fluxNS, ch.release, namespaces[ch.name], ch.name, vals))
	}
	waitReady(t, c, flux, fluxNS, "helm.toolkit.fluxcd.io/v2", "HelmRelease", names(peerCharts), "", 4*time.Minute)
	byHelm := map[string]map[string]map[string]any{}
	for _, ch := range peerCharts {
		byHelm[ch.name] = liveObjects(t, c, refs[ch.name])
	}
	// helm-controller uninstalls them, and the cluster is Flux's.
	for _, ch := range peerCharts {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
		u.SetKind("HelmRelease")
		u.SetNamespace(fluxNS)
		u.SetName(ch.name)
		if err := c.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, func() string {
		for _, ch := range peerCharts {
			if u := getObject(t, c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", fluxNS, ch.name); u != nil {
				return "HelmRelease " + ch.name + " is still uninstalling"
			}
			for id, obj := range liveObjects(t, c, refs[ch.name]) {
				if obj != nil && !strings.HasPrefix(id, "CustomResourceDefinition/") {
					return id + " is still there after helm-controller uninstalled " + ch.name
				}
			}
		}
		return ""
	})

	// kustomize-controller applies the hydrated folders, decrypting
	// their Secrets with the age key.
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fluxNS, Name: "sops-age"},
		StringData: map[string]string{"age.agekey": id.String()}}); err != nil {
		t.Fatal(err)
	}
	apply(fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: deploy, namespace: %s}\nspec: {interval: 1m, url: %s, ref: {branch: env/dev}}", fluxNS, deployURL))
	for _, ch := range peerCharts {
		apply(fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %s, namespace: %s}
spec:
  interval: 1m
  timeout: 3m
  path: ./apps/%s
  prune: true
  wait: true
  sourceRef: {kind: GitRepository, name: deploy}
  decryption: {provider: sops, secretRef: {name: sops-age}}`, ch.name, fluxNS, ch.name))
	}
	waitReady(t, c, flux, fluxNS, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", names(peerCharts), "env/dev@sha1:"+commit, 4*time.Minute)

	checkout := filepath.Join(t.TempDir(), "deploy")
	testenv.Git(t, "", "clone", "-q", "-b", "env/dev", deployURL, checkout)
	for _, ch := range peerCharts {
		t.Run(ch.name, func(t *testing.T) {
			byFlux := liveObjects(t, c, refs[ch.name])
			record, err := os.ReadFile(filepath.Join(checkout, "apps", ch.name, v1alpha1.ProvenanceFile))
			if err != nil {
				t.Fatal(err)
			}
			var prov v1alpha1.Provenance
			if err := yaml.Unmarshal(record, &prov); err != nil {
				t.Fatal(err)
			}
			kept := map[string]bool{} // what the record says kustomize-controller keeps
			for _, h := range prov.Hooks {
				if strings.Contains(h.Unsupported, "keeps it once it succeeds") {
					kept[h.Object] = true
				}
			}
			compared := 0
			for _, id := range refs[ch.name].ids {
				h, f := byHelm[ch.name][id], byFlux[id]
				switch {
				case h == nil && f == nil:
					if !refs[ch.name].hook[id] {
						t.Errorf("%s: neither helm-controller nor kustomize-controller applied it", id)
					}
				case h == nil && kept[id]:
					// Helm deleted it once it succeeded; the record says so.
				case h == nil:
					t.Errorf("%s: kustomize-controller applied it, and helm-controller did not (the record does not say it is kept)", id)
				case f == nil:
					t.Errorf("%s: helm-controller installed it, and kustomize-controller did not", id)
				default:
					compared++
					random := refs[ch.name].random[id]
					if d := objectDiff(normalize(h, random), normalize(f, random)); d != "" {
						t.Errorf("%s differs (- helm-controller, + kustomize-controller):\n%s", id, d)
					}
				}
			}
			for id := range kept {
				if byFlux[id] == nil {
					t.Errorf("%s: the record says kustomize-controller keeps it, and it is not there", id)
				}
			}
			// Nothing else: every object kustomize-controller applied (its
			// inventories, the folder's and its phases') is one of the
			// chart's that helm-controller installed, or one the record
			// says it keeps, or a phase's Kustomization.
			for _, id := range appliedByFlux(t, c, fluxNS, ch.name) {
				if strings.HasPrefix(id, "Kustomization/"+fluxNS+"/") {
					continue
				}
				if byHelm[ch.name][id] == nil && !kept[id] {
					t.Errorf("kustomize-controller applied %s, which helm-controller did not install", id)
				}
			}
			if compared == 0 {
				t.Error("nothing compared")
			}
			if ch.name == "grafana" || ch.name == "redis" {
				// Encrypted in git, decrypted on the cluster.
				for id, obj := range byFlux {
					if strings.HasPrefix(id, "Secret/") {
						if _, enc := obj["sops"]; enc {
							t.Errorf("%s reached the cluster encrypted", id)
						}
					}
				}
			}
		})
	}

	// A hook Job changed (its pod's annotations: the Job's template is
	// immutable) is hydrated and applied: kustomize-controller re-creates
	// it, where applying it over the old one would fail.
	ingress := peerCharts[4]
	writeSync(ingress, ingress.valuesOf(t)+"  admissionWebhooks: {patch: {podAnnotations: {peer.sluice.dev/revision: \"2\"}}}\n")
	if out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--sync-key", keyFile, "--sync", "ingress"); code != 0 {
		t.Fatalf("sluice hydrate: exit %d\n%s%s", code, out, errs)
	}
	commit = strings.Fields(testenv.Git(t, "", "ls-remote", deployURL, "refs/heads/env/dev"))[0]
	waitReady(t, c, flux, fluxNS, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", append([]string{"ingress"}, phasesOf(t, c, fluxNS, "ingress")...), "env/dev@sha1:"+commit, 3*time.Minute)
	job := getObject(t, c, "batch/v1", "Job", namespaces["ingress"], "ingress-ingress-nginx-admission-create")
	if job == nil {
		t.Fatal("the admission Job is gone")
	}
	if a, _, _ := unstructured.NestedString(job.Object, "spec", "template", "metadata", "annotations", "peer.sluice.dev/revision"); a != "2" {
		t.Errorf("the admission Job was not re-created with its change: %v", job.Object["spec"])
	}
}

func names(cs []peerChart) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.name)
	}
	return out
}

// peerReference is what the reference helm binary renders of a chart:
// every object's identity (tests and hooks included), which are hooks,
// and the paths that differ between two of its runs.
type peerReference struct {
	ns     string
	ids    []string
	objs   map[string]map[string]any
	hook   map[string]bool
	random map[string]map[string]bool
}

func reference(t *testing.T, ch peerChart, ns string) *peerReference {
	t.Helper()
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, []byte(ch.valuesOf(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	render := func() map[string]map[string]any {
		cmd := exec.Command(testenv.HelmBinary(t), "template", ch.release, testenv.Chart(t, ch.chart), "--namespace", ns, "-f", vf)
		home := t.TempDir()
		cmd.Env = []string{"HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "none")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm template %s: %v\n%s", ch.chart, err, out)
		}
		return objectsByID(t, string(out))
	}
	a, b := render(), render()
	r := &peerReference{ns: ns, objs: map[string]map[string]any{}, hook: map[string]bool{}, random: map[string]map[string]bool{}}
	for id, obj := range a {
		if len(obj) == 0 {
			continue // a template that rendered nothing but its "# Source:" line
		}
		id = peerIDWithin(id, ns)
		r.ids = append(r.ids, id)
		r.objs[id] = obj
		u := unstructured.Unstructured{Object: obj}
		_, r.hook[id] = u.GetAnnotations()["helm.sh/hook"]
		r.random[id] = map[string]bool{}
		fa, fb := testenv.Fields(obj), testenv.Fields(b[peerIDOf(u)])
		for k, v := range fa {
			if fb[k] != v {
				r.random[id][k] = true
			}
		}
	}
	sort.Strings(r.ids)
	return r
}

// peerIDOf is an object's ID as objectsByID keys it.
func peerIDOf(u unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// peerIDWithin is an ID with the release's namespace filled in where a
// chart leaves it out (helm installs such objects there).
func peerIDWithin(id, ns string) string {
	parts := strings.SplitN(id, "/", 3)
	if parts[1] == "" && !clusterScoped[parts[0]] {
		parts[1] = ns
	}
	if clusterScoped[parts[0]] {
		return parts[0] + "/" + parts[2]
	}
	return strings.Join(parts, "/")
}

// phasesOf names the phase Kustomizations of a sync.
func phasesOf(t *testing.T, c client.Client, ns, sync string) []string {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	l.SetKind("KustomizationList")
	if err := c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"sluice.dev/sync": sync}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range l.Items {
		out = append(out, u.GetName())
	}
	if len(out) == 0 {
		t.Fatalf("no phase Kustomizations of %s", sync)
	}
	return out
}

var clusterScoped = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true, "CustomResourceDefinition": true, "Namespace": true, "IngressClass": true,
	"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "PriorityClass": true, "StorageClass": true,
}

// liveObjects reads every object of a reference from the cluster (nil
// where absent).
func liveObjects(t *testing.T, c client.Client, r *peerReference) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, id := range r.ids {
		u := unstructured.Unstructured{Object: r.objs[id]}
		ns, name := "", u.GetName()
		if !clusterScoped[u.GetKind()] {
			ns = strings.SplitN(id, "/", 3)[1]
		}
		if live := getObject(t, c, u.GetAPIVersion(), u.GetKind(), ns, name); live != nil {
			out[id] = live.Object
		} else {
			out[id] = nil
		}
	}
	return out
}

func getObject(t *testing.T, c client.Client, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) || (err != nil && strings.Contains(err.Error(), "no matches for kind")) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// waitReady waits until the named Flux objects of ns are Ready (at
// revision, if given).
func waitReady(t *testing.T, c client.Client, flux *testenv.Flux, ns, apiVersion, kind string, objs []string, revision string, d time.Duration) {
	t.Helper()
	eventually(t, d, func() string {
		for _, name := range objs {
			u := getObject(t, c, apiVersion, kind, ns, name)
			if u == nil {
				return kind + " " + name + " is missing"
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			ready := false
			for _, cond := range conds {
				if m, _ := cond.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
					ready = true
				}
			}
			got, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
			if !ready || (revision != "" && got != revision) {
				return fmt.Sprintf("%s %s: applied %q, want %q; %v", kind, name, got, revision, conds)
			}
		}
		return ""
	})
}

func eventually(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// normalize is a live object as its spec says, without what the API
// server, the controllers and the tools write of their own (identity,
// status, managed fields, their ownership labels and annotations, the
// addresses allocated) and without the paths of the chart's random
// values.
func normalize(obj map[string]any, random map[string]bool) map[string]string {
	out := testenv.Fields(obj)
	for k := range out {
		drop := strings.HasPrefix(k, ".status") || random[k]
		for _, p := range []string{".metadata.uid", ".metadata.resourceVersion", ".metadata.generation", ".metadata.creationTimestamp", ".metadata.managedFields",
			".metadata.annotations.meta.helm.sh/", ".metadata.labels.helm.toolkit.fluxcd.io/", ".metadata.labels.kustomize.toolkit.fluxcd.io/", ".metadata.annotations.kustomize.toolkit.fluxcd.io/",
			".metadata.annotations.deployment.kubernetes.io/revision", ".metadata.labels.app.kubernetes.io/managed-by", ".spec.clusterIP", ".spec.clusterIPs",
			".spec.selector.matchLabels.batch.kubernetes.io/controller-uid", ".spec.template.metadata.labels.batch.kubernetes.io/controller-uid", ".spec.template.metadata.labels.controller-uid",
			".metadata.labels.batch.kubernetes.io/controller-uid", ".metadata.labels.controller-uid"} {
			if strings.HasPrefix(k, p) {
				drop = true
			}
		}
		if drop {
			delete(out, k)
		}
	}
	return out
}

// objectDiff lists the paths whose values differ.
func objectDiff(a, b map[string]string) string {
	if reflect.DeepEqual(a, b) {
		return ""
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var lines []string
	for k := range keys {
		if a[k] != b[k] {
			lines = append(lines, fmt.Sprintf("  %s: - %s + %s", k, a[k], b[k]))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// appliedByFlux lists the objects a sync's Kustomization applied, and
// those of its phases' Kustomizations, as peer IDs.
func appliedByFlux(t *testing.T, c client.Client, ns, name string) []string {
	t.Helper()
	ks := []string{name}
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	l.SetKind("KustomizationList")
	if err := c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{"sluice.dev/sync": name}); err != nil {
		t.Fatal(err)
	}
	for _, u := range l.Items {
		ks = append(ks, u.GetName())
	}
	var out []string
	for _, k := range ks {
		u := getObject(t, c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, k)
		if u == nil {
			t.Fatalf("no Kustomization %s", k)
		}
		entries, _, _ := unstructured.NestedSlice(u.Object, "status", "inventory", "entries")
		for _, e := range entries {
			// namespace_name_group_kind, a name's ":" written "__"
			id, _ := e.(map[string]any)["id"].(string)
			parts := strings.Split(id, "_")
			if len(parts) < 4 {
				t.Fatalf("inventory entry %q", id)
			}
			ns, kind := parts[0], parts[len(parts)-1]
			obj := strings.ReplaceAll(strings.Join(parts[1:len(parts)-2], "_"), "__", ":")
			if clusterScoped[kind] || ns == "" {
				out = append(out, kind+"/"+obj)
			} else {
				out = append(out, kind+"/"+ns+"/"+obj)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("Kustomization %s applied nothing", name)
	}
	return out
}
