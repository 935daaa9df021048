package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// nestedLists wraps a Secret in a List in a List, a ConfigMap in a
// SecretList-named List, and holds an empty List: kustomize, and kubectl,
// apply a Secret and a ConfigMap.
const nestedLists = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: List
  items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: deep}
    stringData: {password: hunter2hunter2}
- apiVersion: v1
  kind: SecretList
  items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: cm}
    data: {a: b}
- apiVersion: v1
  kind: List
  items: null
`

func kindNames(objs []*yaml.RNode) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

func renderFiles(t *testing.T, files map[string]string, dir string, r *v1alpha1.Render) []*yaml.RNode {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := source.Dir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	res, err := Render(context.Background(), fsys, dir, Options{Render: r, ReleaseName: "x"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := res.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// A Secret in a List in a List is a Secret in every renderer, as
// kustomize (the real binary) reads it.
func TestAListInsideAListIsExpandedInEveryRenderer(t *testing.T) {
	want := []string{"ConfigMap/cm", "Secret/deep"}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "lists.yaml"), []byte(nestedLists), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "kustomization.yaml"), []byte("resources: [lists.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testenv.KustomizeBinary(t), "build", root).Output()
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	real, err := kio.FromBytes(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := kindNames(real); !slices.Equal(got, want) {
		t.Fatalf("the real kustomize builds %v, the test expects %v", got, want)
	}
	chart := strings.ReplaceAll(nestedLists, "{{", "")
	for name, objs := range map[string][]*yaml.RNode{
		"plain":     renderFiles(t, map[string]string{"app/lists.yaml": nestedLists}, "app", nil),
		"kustomize": renderFiles(t, map[string]string{"app/lists.yaml": nestedLists, "app/kustomization.yaml": "resources: [lists.yaml]\n"}, "app", nil),
		"helm":      renderFiles(t, map[string]string{"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n", "app/templates/lists.yaml": chart}, "app", nil),
	} {
		if got := kindNames(objs); !slices.Equal(got, want) {
			t.Errorf("%s renders %v, kustomize %v", name, got, want)
		}
	}
}

// What a decoder reads as the kind is the kind: a !!binary "Secret" is
// read as one. A key given twice is refused: parsers differ on which
// one wins.
func TestAnObjectIsWhatItsDecoderReads(t *testing.T) {
	objs := renderFiles(t, map[string]string{"app/s.yaml": "apiVersion: !!binary djE=\nkind: !!binary U2VjcmV0\nmetadata: {name: tagged}\nstringData: {a: b}\n"}, "app", nil)
	if len(objs) != 1 || objs[0].GetKind() != "Secret" || objs[0].GetApiVersion() != "v1" {
		t.Fatalf("read %v as %s %s", kindNames(objs), objs[0].GetApiVersion(), objs[0].GetKind())
	}
	for _, doc := range []string{
		"apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: twice}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: a, name: b}\n",
	} {
		root := t.TempDir()
		os.WriteFile(filepath.Join(root, "x.yaml"), []byte(doc), 0o644)
		fsys, _ := source.Dir(root)
		_, err := Render(context.Background(), fsys, ".", Options{})
		fsys.Close()
		if err == nil || !strings.Contains(err.Error(), "is given twice") {
			t.Errorf("%q: %v", doc, err)
		}
	}
}
