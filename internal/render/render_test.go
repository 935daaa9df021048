package render

import (
	"context"
	"os/exec"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
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

func TestKustomizeMatchesKubectlKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: the reference output cannot be produced")
	}
	res, err := Render(context.Background(), testRepo(t), "overlays/dev", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Test binaries carry no module versions; the sluice binary does.
	if res.Renderer.Name != Kustomize || res.Renderer.Version == "" {
		t.Errorf("renderer = %+v", res.Renderer)
	}
	out, err := exec.Command(kubectl, "kustomize", "testdata/repo/overlays/dev").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	want, err := kio.FromBytes(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(res.Objects) {
		t.Fatalf("got %v, kubectl gives %v", ids(res.Objects), ids(want))
	}
	// The same objects, field for field, in the same order.
	for i := range want {
		g, w := res.Objects[i].MustString(), want[i].MustString()
		if g != w {
			t.Errorf("object %d differs:\n--- sluice\n%s\n--- kubectl kustomize\n%s", i, g, w)
		}
	}
	if got, want := inputPaths(res.Inputs), "base base/deployment.yaml base/kustomization.yaml base/service.yaml overlays/dev overlays/dev/kustomization.yaml overlays/dev/namespace.yaml overlays/dev/replicas.yaml"; !strings.HasPrefix(got, "") || !containsAll(got, want) {
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
	got := ids(res.Objects)
	sort.Strings(got)
	if want := "Deployment/shop/web-shop Job//web-migrate StatefulSet//web-redis"; strings.Join(got, " ") != want {
		t.Fatalf("objects = %v, want %s", got, want)
	}
	for _, o := range res.Objects {
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
	if got := strings.Join(ids(res.Objects), " "); got != "ConfigMap//a ConfigMap//b Secret//c" {
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
		{"remote base refused, not cloned", mapFS{"k/kustomization.yaml": "resources:\n- github.com/org/repo/deploy?ref=v1\n"}, "k", `"github.com/org/repo/deploy?ref=v1": remote bases are not read here`},
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
	for i, o := range res.Objects {
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
	for i, o := range chart.Objects {
		if o.GetKind() == "StatefulSet" && chart.Origins[i] != "chart/charts/redis/templates/statefulset.yaml" {
			t.Errorf("chart origin = %s", chart.Origins[i])
		}
	}
}
