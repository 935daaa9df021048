package render

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

// TestKustomizeSchemasAreEachBuildsOwn, as teams whose kustomizations
// set their own OpenAPI schema (kyaml's, for the whole process), at the
// root or in a base, rendered in one process one after another and side
// by side with teams that do not: each build prints what the kustomize
// release prints for it alone.
func TestKustomizeSchemasAreEachBuildsOwn(t *testing.T) {
	bin := testenv.KustomizeBinary(t)
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - {name: app, image: app:1}\n      - {name: sidecar, image: proxy:1}\n"
	patch := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: app, image: app:2}\n"
	// A schema that knows no Deployment: a patch replaces the list of
	// containers that the built-in schema merges by name.
	files := map[string]string{
		"base/kustomization.yaml":       "resources: [deploy.yaml]\n",
		"base/deploy.yaml":              deploy,
		"builtin/kustomization.yaml":    "resources: [../base]\npatches:\n- path: patch.yaml\n",
		"builtin/patch.yaml":            patch,
		"root/kustomization.yaml":       "openapi: {path: schema.json}\nresources: [../base]\npatches:\n- path: patch.yaml\n",
		"root/schema.json":              `{"definitions": {}}`,
		"root/patch.yaml":               patch,
		"schemabase/kustomization.yaml": "openapi: {path: schema.json}\nresources: [../base]\n",
		"schemabase/schema.json":        `{"definitions": {}}`,
		"viabase/kustomization.yaml":    "resources: [../schemabase]\npatches:\n- path: patch.yaml\n",
		"viabase/patch.yaml":            patch,
	}
	tree := t.TempDir()
	for name, content := range files {
		p := filepath.Join(tree, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{"builtin", "root", "builtin", "viabase", "builtin", "root", "viabase"}
	want := map[string]string{}
	for _, dir := range dirs {
		out, err := exec.Command(bin, "build", filepath.Join(tree, dir)).Output()
		if err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		want[dir] = string(out)
	}
	if want["builtin"] == want["root"] || want["root"] != want["viabase"] {
		t.Fatalf("the schemas make no difference to kustomize itself:\n%s\n%s", want["builtin"], want["root"])
	}
	build := func(dir string) string {
		res, _, err := Local(context.Background(), filepath.Join(tree, dir), Options{})
		if err != nil {
			t.Error(err)
			return ""
		}
		got, _ := res.YAML()
		return string(got)
	}
	for i, dir := range dirs {
		if got := build(dir); got != want[dir] {
			t.Errorf("build %d, %s: sluice prints\n%s\nkustomize build prints\n%s", i, dir, got, want[dir])
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		for _, dir := range dirs {
			wg.Go(func() {
				if got := build(dir); got != want[dir] {
					t.Errorf("%s beside other builds: sluice prints\n%s\nkustomize build prints\n%s", dir, got, want[dir])
				}
			})
		}
	}
	wg.Wait()
}
