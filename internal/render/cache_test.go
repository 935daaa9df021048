package render

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestLocalCacheServesUnchangedTreesAndSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	cache := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("kustomization.yaml", "resources: [cm.yaml]\n")
	write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: \"1\"}\n")
	render := func() *Result {
		t.Helper()
		res, _, err := Local(context.Background(), dir, Options{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	value := func(res *Result) string {
		t.Helper()
		nodes, err := res.Nodes()
		if err != nil || len(nodes) == 0 {
			t.Fatalf("nodes: %v %d", err, len(nodes))
		}
		v, _ := nodes[0].GetString("data.v")
		return v
	}
	if res := render(); res.JSON != nil || value(res) != "1" {
		t.Fatalf("first render came from the cache or is wrong: %q", value(res))
	}
	if res := render(); res.JSON == nil || value(res) != "1" {
		t.Fatalf("an unchanged tree was rendered again (or wrongly): JSON %v", res.JSON != nil)
	}
	// An edited file is seen.
	write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: \"2\"}\n")
	if res := render(); res.JSON != nil || value(res) != "2" {
		t.Fatalf("an edit was served from the cache: %q", value(res))
	}
	// A file the kustomization starts to list is seen.
	write("more.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	write("kustomization.yaml", "resources: [cm.yaml, more.yaml]\n")
	if res := render(); count(t, res) != 2 {
		t.Fatalf("after adding a resource: %d objects", count(t, res))
	}
	// The kustomization's removal (the folder becomes plain YAML) is seen.
	os.Remove(filepath.Join(dir, "kustomization.yaml"))
	if res := render(); res.Renderer.Name != Plain || count(t, res) != 2 {
		t.Fatalf("after removing the kustomization: renderer %s, %d objects", res.Renderer.Name, count(t, res))
	}
}

func count(t *testing.T, res *Result) int {
	t.Helper()
	nodes, err := res.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	return len(nodes)
}
