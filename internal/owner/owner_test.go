package owner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// flux makes a Flux from a Kustomization's spec, as YAML.
func flux(t *testing.T, spec string) *Flux {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n"+spec), &u.Object); err != nil {
		t.Fatal(err)
	}
	f, err := fluxOf(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// renderAs renders dir of a tree as f applies it.
func renderAs(t *testing.T, f *Flux, root, dir string) ([]*yaml.RNode, error) {
	t.Helper()
	fsys, err := source.Dir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	res, err := render.Render(context.Background(), fsys, dir, f.Options(render.Options{}))
	if err != nil {
		return nil, err
	}
	return res.Nodes()
}

func field(t *testing.T, objs []*yaml.RNode, kind, name string, path ...string) string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			n, err := o.Pipe(yaml.Lookup(path...))
			if err != nil || n == nil {
				return "<none>"
			}
			return strings.TrimSpace(n.MustString())
		}
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	t.Fatalf("no %s %s among %v", kind, name, names)
	return ""
}

const deployment = `apiVersion: apps/v1
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

func TestAMissingComponentOrANonKubernetesFileFailsNamingIt(t *testing.T) {
	root := tree(t, map[string]string{"apps/web.yaml": deployment, "apps/notes.yaml": "just: notes\n"})
	_, err := renderAs(t, flux(t, "  path: ./apps\n  sourceRef: {kind: GitRepository, name: fleet}\n"), root, "apps")
	if err == nil || !strings.Contains(err.Error(), "apps/notes.yaml") || !strings.Contains(err.Error(), "Kustomization flux-system/apps") {
		t.Errorf("err = %v, want one naming apps/notes.yaml and the Kustomization", err)
	}
	root = tree(t, map[string]string{"apps/web.yaml": deployment})
	_, err = renderAs(t, flux(t, "  components: [nope]\n  sourceRef: {kind: GitRepository, name: fleet}\n"), root, "apps")
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("err = %v, want one naming the missing component", err)
	}
}

func TestArgoCDGlobsAndImages(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.yaml", "a.yaml", true},
		{"*.yaml", "sub/a.yaml", true}, // * crosses folders, as Argo CD's globs
		{"{a,b}.yaml", "b.yaml", true},
		{"{sub/not-*,other/*}", "sub/not-this.yaml", true},
		{"{sub/not-*,other/*}", "sub/this.yaml", false},
		{"?.yml", "c.yml", true},
		{"?.yml", "cc.yml", false},
	} {
		if got := globMatch(c.pattern, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
	for arg, want := range map[string]string{
		"nginx:1.25":                       "nginx  1.25 ",
		"nginx=registry.example.com/ngx:2": "nginx registry.example.com/ngx 2 ",
		"web@sha256:abc":                   "web   sha256:abc",
		"localhost:5000/web=mirror/web:v1": "localhost:5000/web mirror/web v1 ",
		"registry.example.com:443/web:1.0": "registry.example.com:443/web  1.0 ",
	} {
		im, err := parseImageArg(arg)
		if err != nil {
			t.Errorf("%s: %v", arg, err)
			continue
		}
		if got := im.Name + " " + im.NewName + " " + im.NewTag + " " + im.Digest; got != want {
			t.Errorf("%s: %q, want %q", arg, got, want)
		}
	}
	if _, err := parseImageArg("nginx"); err == nil {
		t.Error("an image without a tag, digest or new name is refused, as kustomize edit set image refuses it")
	}
}
