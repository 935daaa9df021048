package testenv

import (
	"os"
	"path/filepath"
)

// Chart returns the path of a chart vendored from its public repository
// under internal/render/testdata/charts ("podinfo", "grafana",
// "bitnami/redis", "cert-manager", "ingress-nginx"; the README there says
// from where, with their licences).
func Chart(t TB, name string) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(root, "internal", "render", "testdata", "charts", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(p, "Chart.yaml")); err != nil {
		t.Fatalf("no vendored chart %s: %v", name, err)
	}
	return p
}

// CopyChart copies a vendored chart into dir (a work tree's folder).
func (w *Work) CopyChart(t TB, name, dir string) *Work {
	t.Helper()
	if err := os.CopyFS(filepath.Join(w.Dir, filepath.FromSlash(dir)), os.DirFS(Chart(t, name))); err != nil {
		t.Fatalf("copying chart %s: %v", name, err)
	}
	return w
}
