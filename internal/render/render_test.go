package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

func testRepo(t *testing.T) *source.DirFS {
	t.Helper()
	d, err := source.Dir("testdata/repo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// objects are a render's objects as YAML nodes.
func objects(t *testing.T, res *Result) []*yaml.RNode {
	t.Helper()
	nodes, err := res.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func ids(objs []*yaml.RNode) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func inputPaths(in []v1alpha1.Input) string {
	var out []string
	for _, i := range in {
		out = append(out, i.Path)
	}
	return strings.Join(out, " ")
}

func TestKustomizePrintsWhatTheKustomizeReleasePrints(t *testing.T) {
	bin := testenv.KustomizeBinary(t)
	// The repository's overlay, and a tree using most of what kustomize
	// does: components, generators, replacements, JSON and strategic
	// patches, images, replicas, labels with selectors, name affixes.
	tree := t.TempDir()
	for name, content := range map[string]string{
		"base/kustomization.yaml": "resources: [deploy.yaml, svc.yaml]\nconfigMapGenerator:\n- name: cfg\n  literals: [A=1]\nsecretGenerator:\n- name: sec\n  literals: [T=x]\n",
		"base/deploy.yaml":        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: registry.example.com/web:1\n        envFrom: [{configMapRef: {name: cfg}}, {secretRef: {name: sec}}]\n",
		"base/svc.yaml":           "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n",
		"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- target: {kind: Service}\n  patch: |-\n    - op: add\n      path: /metadata/annotations\n      value: {exported: \"yes\"}\n",
		"ov/kustomization.yaml":   "namespace: shop\nnamePrefix: dev-\nnameSuffix: -x\nresources: [../base]\ncomponents: [../comp]\nlabels:\n- pairs: {env: dev}\n  includeSelectors: true\nimages:\n- name: registry.example.com/web\n  newTag: \"2\"\nreplicas:\n- name: web\n  count: 3\npatches:\n- path: res.yaml\nreplacements:\n- source: {kind: Service, name: web, fieldPath: metadata.name}\n  targets:\n  - select: {kind: Deployment}\n    fieldPaths: [spec.template.metadata.annotations.svc]\n    options: {create: true}\n",
		"ov/res.yaml":             "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        resources: {limits: {cpu: \"1\"}}\n",
	} {
		p := filepath.Join(tree, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"testdata/repo/overlays/dev", filepath.Join(tree, "ov")} {
		res, _, err := Local(context.Background(), dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := res.YAML()
		if err != nil {
			t.Fatal(err)
		}
		want, err := exec.Command(bin, "build", dir).Output()
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: sluice prints\n%s\nkustomize build prints\n%s", dir, got, want)
		}
	}
	res, err := Render(context.Background(), testRepo(t), "overlays/dev", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Test binaries carry no module versions; the sluice binary does.
	if res.Renderer.Name != Kustomize || res.Renderer.Version == "" {
		t.Errorf("renderer = %+v", res.Renderer)
	}
	if got, want := inputPaths(res.Inputs), "base base/deployment.yaml base/kustomization.yaml base/service.yaml overlays/dev overlays/dev/kustomization.yaml overlays/dev/namespace.yaml overlays/dev/replicas.yaml"; !containsAll(got, want) {
		t.Errorf("inputs = %s\nwant at least %s", got, want)
	}
	if strings.Contains(inputPaths(res.Inputs), "chart") || strings.Contains(inputPaths(res.Inputs), "plain") {
		t.Errorf("inputs include folders the overlay never reads: %s", inputPaths(res.Inputs))
	}
}

func containsAll(got, want string) bool {
	have := map[string]bool{}
	for _, p := range strings.Fields(got) {
		have[p] = true
	}
	for _, p := range strings.Fields(want) {
		if !have[p] {
			return false
		}
	}
	return true
}

func TestHelmRendersChartWithVendoredDependencyHooksAndValues(t *testing.T) {
	s := &v1alpha1.Render{Helm: &v1alpha1.HelmRender{
		ReleaseName: "web", Namespace: "shop", KubeVersion: "1.31.0",
		ValuesFiles: []string{"values-dev.yaml"},
		Values:      &apiextensionsv1.JSON{Raw: []byte(`{"image":"registry.example.com/team/shop:2.1"}`)},
	}}
	res, err := Render(context.Background(), testRepo(t), "chart", Options{Render: s})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(objects(t, res))
	sort.Strings(got)
	if want := "Deployment/shop/web-shop Job//web-migrate StatefulSet//web-redis"; strings.Join(got, " ") != want {
		t.Fatalf("objects = %v, want %s", got, want)
	}
	for _, o := range objects(t, res) {
		if o.GetKind() != "Deployment" {
			continue
		}
		if r := o.Field("spec").Value.Field("replicas").Value.YNode().Value; r != "2" {
			t.Errorf("replicas = %s: values-dev.yaml not applied", r)
		}
		if img, _ := o.GetString("spec.template.spec.containers[0].image"); img != "registry.example.com/team/shop:2.1" {
			t.Errorf("image = %s: inline values not applied over files", img)
		}
		if l := o.GetLabels()["kube"]; l != "v1.31.0" {
			t.Errorf("kubeVersion label = %q", l)
		}
	}
	if p := inputPaths(res.Inputs); strings.Contains(p, "NOTES.md") || !strings.Contains(p, "chart/charts/redis/Chart.yaml") {
		t.Errorf("inputs = %s", p)
	}
}

func TestHelmMissingDependencyIsClear(t *testing.T) {
	fsys := mapFS{
		"c/Chart.yaml":  "apiVersion: v2\nname: c\nversion: 0.1.0\ndependencies:\n- name: postgres\n  version: 1.0.0\n  repository: https://charts.example.com\n",
		"c/values.yaml": "{}\n",
	}
	_, err := Render(context.Background(), fsys.fs(), "c", Options{ReleaseName: "x"})
	if err == nil || !strings.Contains(err.Error(), "postgres") || !strings.Contains(err.Error(), "helm dependency build") {
		t.Fatalf("err = %v", err)
	}
}

func TestPlainReadsYAMLAndJSONRecursively(t *testing.T) {
	res, err := Render(context.Background(), testRepo(t), "plain", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(objects(t, res)), " "); got != "ConfigMap//a ConfigMap//b Secret//c" {
		t.Errorf("objects = %s", got)
	}
}

func TestBadInputNamesFileAndDocument(t *testing.T) {
	tests := []struct {
		name  string
		files mapFS
		dir   string
		want  string
	}{
		{"object without kind", mapFS{"p/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nmetadata: {name: b}\n"}, "p", "p/a.yaml: document 2 (line 5): not a Kubernetes object"},
		{"yaml syntax", mapFS{"p/a.yaml": "a: [b\n"}, "p", "p/a.yaml"},
		{"kustomize missing resource", mapFS{"k/kustomization.yaml": "resources: [missing.yaml]\n"}, "k", "missing.yaml"},
		{"remote base refused, not cloned", mapFS{"k/kustomization.yaml": "resources:\n- github.com/org/repo/deploy?ref=v1\n"}, "k", `"github.com/org/repo/deploy?ref=v1": remote bases are refused here`},
		{"missing path", mapFS{"x/a.yaml": "a: 1\n"}, "nope", `path "nope" not found`},
		{"helm template error", mapFS{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/templates/x.yaml": "{{ .Values.nope.deeper }}\n"}, "c", "chart c:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(context.Background(), tt.files.fs(), tt.dir, Options{ReleaseName: "r"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestRenderRecordsEachObjectsFile(t *testing.T) {
	res, err := Render(context.Background(), testRepo(t), "overlays/dev", Options{Origins: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for i, o := range objects(t, res) {
		got[o.GetKind()] = res.Origins[i]
		if _, ok := o.GetAnnotations()[originAnnotation]; ok {
			t.Errorf("%s kept the origin annotation Sluice asked for", o.GetKind())
		}
	}
	want := map[string]string{"Deployment": "base/deployment.yaml", "Service": "base/service.yaml", "Namespace": "overlays/dev/namespace.yaml", "ConfigMap": "base/kustomization.yaml"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("origin of %s = %q, want %q", k, got[k], v)
		}
	}
	plain, _ := Render(context.Background(), testRepo(t), "plain", Options{Origins: true})
	if plain.Origins[1] != "plain/a.yaml:7" {
		t.Errorf("plain origins = %v", plain.Origins)
	}
	chart, _ := Render(context.Background(), testRepo(t), "chart", Options{ReleaseName: "r", Origins: true})
	for i, o := range objects(t, chart) {
		if o.GetKind() == "StatefulSet" && chart.Origins[i] != "chart/charts/redis/templates/statefulset.yaml" {
			t.Errorf("chart origin = %s", chart.Origins[i])
		}
	}
}

// A chart's objects without a namespace go to the release's, as helm
// install puts them; cluster-scoped ones, Kubernetes' own or of a CRD of
// the render, stay without.
func TestObjectsWithoutANamespaceAreTheReleases(t *testing.T) {
	objs, err := kio.FromBytes([]byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kept, namespace: other}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: web}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusterissuers.cert-manager.io}
spec: {group: cert-manager.io, scope: Cluster, names: {kind: ClusterIssuer}}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: self}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: self}
`))
	if err != nil {
		t.Fatal(err)
	}
	ReleaseNamespace(objs, "shop")
	want := []string{"shop", "other", "", "", "", "shop"}
	for i, o := range objs {
		if o.GetNamespace() != want[i] {
			t.Errorf("%s %s: namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), want[i])
		}
	}
}
