package session

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// fluxWorkload is what a Flux Kustomization "apps" (in %[2]s) applied
// into %[1]s.
const fluxWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: %[2]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:1.0
        env: [{name: MODE, value: prod}, {name: DEBUG, value: "0"}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: %[2]s}
data: {color: blue}
`

const fluxOwner = `apiVersion: v1
kind: Namespace
metadata: {name: %[2]s}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: %[2]s}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`

// devTree is the developer's working tree: web changed (an env var
// dropped), settings changed, a ConfigMap added.
const devTree = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:dev
        env: [{name: MODE, value: dev}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: green}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: extra}
data: {new: "yes"}
`

func fluxSetup(t *testing.T, c *cluster.Client) (ns, fluxNS string) {
	t.Helper()
	ns, fluxNS = testenv.Namespace("app"), testenv.Namespace("flux")
	sub := func(s string) string { return strings.ReplaceAll(s, "%[2]s", fluxNS) }
	applyAs(t, c, "kubectl", parse(t, ns, sub(fluxOwner)))
	applyAs(t, c, "kustomize-controller", parse(t, ns, sub(fluxWorkload)))
	return ns, fluxNS
}

func TestReplaceSessionSuspendsFluxAndPutsEverythingBack(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns, fluxNS := fluxSetup(t, c)
	before := dump(t, []string{ns, fluxNS})

	s := startSession(t, c, Options{Namespace: ns, Path: "deploy/dev"})
	res, err := s.Apply(ctx, parse(t, ns, devTree), cluster.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); got != "configmap/extra created\nconfigmap/settings configured\ndeployment.apps/web configured" {
		t.Errorf("first apply:\n%s", got)
	}
	ks := get(t, c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", fluxNS, "apps")
	if v, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend"); !v {
		t.Errorf("the owning Kustomization is not suspended: %v", ks.Object["spec"])
	}
	web := get(t, c, "apps/v1", "Deployment", ns, "web")
	containers, _, _ := unstructured.NestedSlice(web.Object, "spec", "template", "spec", "containers")
	env := containers[0].(map[string]any)["env"].([]any)
	if len(env) != 1 || containers[0].(map[string]any)["image"] != "registry.example.com/web:dev" {
		t.Errorf("the working tree's Deployment is not what runs (Flux's env var should be gone): %v", containers)
	}
	rec := s.Record()
	if len(rec.Saved) != 2 || len(rec.Created) != 1 || len(rec.Owners) != 1 || string(rec.Owners[0].Prior) != "null" {
		t.Errorf("record: saved %d created %v owners %+v", len(rec.Saved), rec.Created, rec.Owners)
	}

	// The developer deletes the extra ConfigMap and edits settings again.
	res, err = s.Apply(ctx, parse(t, ns, strings.Split(devTree, "\n---\n")[0]+"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {color: red}\n"), cluster.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); got != "configmap/extra deleted\nconfigmap/settings configured\ndeployment.apps/web unchanged" {
		t.Errorf("second apply:\n%s", got)
	}

	r, err := s.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Restored) != 2 || len(r.Resumed) != 1 {
		t.Errorf("restoration: %+v", r)
	}
	sameDump(t, before, dump(t, []string{ns, fluxNS}))
	ks = get(t, c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", fluxNS, "apps")
	if _, found, _ := unstructured.NestedFieldNoCopy(ks.Object, "spec", "suspend"); found {
		t.Errorf("spec.suspend should be unset again, as before: %v", ks.Object["spec"])
	}
	if ks.GetAnnotations()[annotationFluxReconcile] == "" {
		t.Error("Flux was not asked to reconcile")
	}
	// Flux owns its fields again: its next apply finds them its own.
	web = get(t, c, "apps/v1", "Deployment", ns, "web")
	for _, m := range web.GetManagedFields() {
		if m.Manager == cluster.FieldManager {
			t.Errorf("sluice still owns fields of web: %+v", web.GetManagedFields())
		}
	}
	if infos, _ := List(ctx, c); len(infos) != 0 {
		for _, in := range infos {
			if in.Name == s.Name() {
				t.Errorf("the session is still listed: %+v", in)
			}
		}
	}
}
