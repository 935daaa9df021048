package main

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// objectsByID parses a YAML stream into objects keyed Kind/namespace/name.
func objectsByID(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		u := unstructured.Unstructured{Object: m}
		out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = m
	}
	return out
}

// sameObjects fails with the differences between what Argo CD generates
// and what Sluice renders.
func sameObjects(t *testing.T, argo, sluice map[string]map[string]any) {
	t.Helper()
	var ids []string
	for id := range argo {
		ids = append(ids, id)
	}
	for id := range sluice {
		if _, ok := argo[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		a, s := argo[id], sluice[id]
		if !reflect.DeepEqual(a, s) {
			ya, _ := yaml.Marshal(a)
			ys, _ := yaml.Marshal(s)
			t.Errorf("%s:\nArgo CD generates:\n%s\nSluice renders:\n%s", id, ya, ys)
		}
	}
}

// A folder an Argo CD Application deploys renders as Argo CD's own
// repo-server generates it, for each kind of source and its options.
func TestRenderAsAnArgoCDApplicationIsWhatArgoCDGenerates(t *testing.T) {
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/web:1.0}]
`
	tests := []struct {
		name, path string
		files      map[string]string
		spec       string
		args       []string
		// cm is argocd-cm's data, where Sluice reads Argo CD's settings.
		cm string
	}{{
		name: "kustomize options",
		path: "apps/web",
		files: map[string]string{
			"apps/web/kustomization.yaml":       "resources: [web.yaml, cm.yaml]\nimages: [{name: registry.example.com/web, newTag: '1.5'}]\ncommonLabels: {tier: front}\n",
			"apps/web/web.yaml":                 deployment,
			"apps/web/cm.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1'}\n",
			"apps/web/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n",
			"apps/web/extra/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n",
		},
		spec: `  source:
    repoURL: REPO
    path: apps/web
    kustomize:
      namePrefix: eu-
      nameSuffix: -v2
      images: ["registry.example.com/web=mirror.example.com/web:2.0"]
      commonLabels: {team: shop}
      commonAnnotations: {app: "${ARGOCD_APP_NAME}", ns: "$ARGOCD_APP_NAMESPACE"}
      commonAnnotationsEnvsubst: true
      namespace: shop
      replicas: [{name: web, count: 4}]
      components: [extra, missing]
      ignoreMissingComponents: true
      patches:
      - target: {kind: ConfigMap, name: settings}
        patch: |
          - op: add
            path: /data/b
            value: "2"
`,
	}, {
		name: "directory options, label tracking",
		path: "plain",
		files: map[string]string{
			"plain/a.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
			"plain/.hidden.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hidden}\n",
			"plain/skipped.yaml":      "# +argocd:skip-file-rendering\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: skipped}\n",
			"plain/sub/b.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
			"plain/sub/deep/c.yml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			"plain/sub/not-this.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: not-this}\n",
			"plain/other/d.json":      `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}}`,
		},
		spec: `  source:
    repoURL: REPO
    path: plain
    directory:
      recurse: true
      exclude: "{sub/not-*,other/*}"
`,
		args: []string{"-tracking", "label"},
		cm:   "{application.resourceTrackingMethod: label}",
	}, {
		name: "a chart: values files (one from a ref source), values, valuesObject, parameters, release name, CRDs; an installation ID",
		path: "charts/web",
		files: map[string]string{
			"charts/web/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
			"charts/web/values.yaml":       "color: blue\nsize: s\nlist: [1]\n",
			"charts/web/values-prod.yaml":  "size: l\n",
			"charts/web/crds/crd.yaml":     "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n",
			"charts/web/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-config, namespace: {{ .Release.Namespace }}}\ndata:\n  color: {{ .Values.color | quote }}\n  size: {{ .Values.size | quote }}\n  region: {{ .Values.region | quote }}\n  port: {{ .Values.port | quote }}\n  id: {{ .Values.id | quote }}\n",
			"envs/prod/values.yaml":        "region: eu\n",
		},
		spec: `  sources:
  - repoURL: REPO
    path: charts/web
    helm:
      releaseName: shop
      valueFiles: [values-prod.yaml, $values/envs/prod/values.yaml, missing.yaml]
      ignoreMissingValueFiles: true
      values: |
        color: red
      valuesObject: {color: green}
      parameters: [{name: port, value: "8080"}, {name: id, value: "007", forceString: true}]
  - repoURL: REPO
    ref: values
`,
		args: []string{"-installation-id", "eu-1"},
		cm:   "{installationID: eu-1}",
	}}
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := testenv.Namespace("argo")
			repo := "https://git.example.com/" + ns + "/fleet.git" // the control plane is shared
			w := testenv.NewWork(t, "")
			testenv.Git(t, w.Dir, "remote", "add", "origin", repo)
			w.Write(tt.files).Commit("fleet")
			name := []string{"web", "plain", "chart"}[i]
			app := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: " + name + ", namespace: argocd}\nspec:\n  project: default\n  destination: {server: https://kubernetes.default.svc, namespace: " + ns + "}\n" + strings.ReplaceAll(tt.spec, "REPO", repo)
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(app), &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetName(name + "-" + strings.TrimPrefix(ns, "argo-"))
			ensureNamespace(t, c, "argocd")
			if err := c.Kube().Create(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			app, _ = func() (string, error) { b, err := yaml.Marshal(u.Object); return string(b), err }()
			if tt.cm != "" {
				createObject(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm, namespace: argocd}\ndata: "+tt.cm+"\n")
				defer deleteObject(t, c, "v1", "ConfigMap", "argocd", "argocd-cm")
			}
			want := testenv.ArgoManifests(t, app, w.Dir, tt.args...)
			out, stderr, code := run(t, "render", filepath.Join(w.Dir, tt.path), "--kubeconfig="+cp.Kubeconfig, "--as-owner", "auto", "--kube-version", "1.37.2")
			if code != 0 {
				t.Fatalf("render --as-owner: exit %d: %s", code, stderr)
			}
			sameObjects(t, objectsByID(t, want), objectsByID(t, out))
		})
	}
}

func ensureNamespace(t *testing.T, c *cluster.Client, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	u.SetName(name)
	if err := c.Kube().Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createObject(t *testing.T, c *cluster.Client, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := c.Kube().Create(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func deleteObject(t *testing.T, c *cluster.Client, apiVersion, kind, ns, name string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := c.Kube().Delete(context.Background(), u); err != nil {
		t.Error(err)
	}
}
