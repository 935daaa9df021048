package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
)

const validSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata:
  name: guestbook-dev
  labels: {env: dev}
spec:
  source:
    repo: https://git.example.com/team/guestbook.git
    ref: main
    path: deploy/overlays/dev/
  render:
    helm:
      values: {replicaCount: 2, nested: {a: [1, 2]}}
      kubeVersion: "1.31.0"
  images:
  - name: registry.example.com/team/*
    tag: dev
  - name: registry.example.com/team/api
    strategy: semver
    constraint: ">=1.2.0 <2.0.0"
  destination:
    repo: https://git.example.com/team/service-deploy.git
    branch: env/dev
    path: apps/guestbook
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAppliesDefaults(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "syncs/app.yaml", validSync+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ignored}\n")
	set, err := Load(filepath.Join(dir, "syncs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.ManifestSyncs) != 1 {
		t.Fatalf("got %d syncs, want 1", len(set.ManifestSyncs))
	}
	ms := set.ManifestSyncs[0]
	if got := ms.Spec.Source.Path; got != "deploy/overlays/dev" {
		t.Errorf("source.path = %q, want it cleaned", got)
	}
	if ms.Spec.Destination.Layout != v1alpha1.LayoutPerObject || ms.Spec.Destination.Mode != v1alpha1.ModePush {
		t.Errorf("destination defaults not applied: %+v", ms.Spec.Destination)
	}
	if ms.Spec.Images[0].Strategy != v1alpha1.StrategyMutableTag {
		t.Errorf("image strategy default = %q", ms.Spec.Images[0].Strategy)
	}
	if ms.Spec.Render.Helm.ReleaseName != "guestbook-dev" {
		t.Errorf("helm releaseName default = %q", ms.Spec.Render.Helm.ReleaseName)
	}
	if got := string(ms.Spec.Render.Helm.Values.Raw); got != `{"nested":{"a":[1,2]},"replicaCount":2}` {
		t.Errorf("helm values = %s", got)
	}
	if ms.Origin.Line != 1 || ms.Labels["env"] != "dev" {
		t.Errorf("origin/labels wrong: %+v %v", ms.Origin, ms.Labels)
	}
}

func TestLoadReportsEveryErrorWithFileAndLine(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
	}{
		{
			name:    "unknown field with suggestion",
			content: strings.Replace(validSync, "    ref: main\n", "    rev: main\n", 1),
			want:    []string{`a.yaml:9: ManifestSync guestbook-dev: spec.source.rev: unknown field; did you mean "ref"?`},
		},
		{
			name:    "wrong type",
			content: strings.Replace(validSync, `kubeVersion: "1.31.0"`, `kubeVersion: 1.31`, 1),
			want:    []string{`a.yaml:14: ManifestSync guestbook-dev: spec.render.helm.kubeVersion: expected a string, got the number 1.31 (quote it: "1.31")`},
		},
		{
			name:    "missing required field",
			content: strings.Replace(validSync, "    path: apps/guestbook\n", "", 1),
			want:    []string{`a.yaml:21: ManifestSync guestbook-dev: spec.destination.path: Required value`},
		},
		{
			name:    "invalid name",
			content: strings.Replace(validSync, "name: guestbook-dev", "name: Guestbook_Dev", 1),
			want:    []string{`a.yaml:4: ManifestSync Guestbook_Dev: metadata.name: Invalid value: "Guestbook_Dev"`},
		},
		{
			name:    "unknown kind",
			content: strings.Replace(validSync, "kind: ManifestSync", "kind: ManifestSink", 1),
			want:    []string{`a.yaml:2: ManifestSink guestbook-dev: kind: unknown kind "ManifestSink"`},
		},
		{
			name:    "bad enum and forbidden combination, together",
			content: strings.Replace(validSync, "    strategy: semver\n", "    strategy: newest\n", 1),
			want: []string{
				`a.yaml:19: ManifestSync guestbook-dev: spec.images[1].strategy: Unsupported value: "newest"`,
				`a.yaml:20: ManifestSync guestbook-dev: spec.images[1].constraint: Forbidden: only the semver strategy`,
			},
		},
		{
			name:    "yaml syntax",
			content: "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata:\n  name: a: b\n",
			want:    []string{`a.yaml:4: YAML syntax:`},
		},
		{
			name:    "path escaping its root",
			content: strings.Replace(validSync, "path: apps/guestbook", "path: ../apps", 1),
			want:    []string{`a.yaml:24: ManifestSync guestbook-dev: spec.destination.path: Invalid value: "../apps": must not leave its root`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			f := write(t, dir, "a.yaml", tt.content)
			_, err := Load(f)
			if err == nil {
				t.Fatal("Load succeeded, want errors")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(lines), len(tt.want), err)
			}
			for i, want := range tt.want {
				want = f[:len(f)-len("a.yaml")] + want
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, lines[i], want)
				}
			}
		})
	}
}

func TestLoadRejectsOverlappingDestinations(t *testing.T) {
	dir := t.TempDir()
	a := strings.NewReplacer("guestbook-dev", "a").Replace(validSync)
	b := strings.NewReplacer("guestbook-dev", "b", "path: apps/guestbook", "path: apps/guestbook/sub",
		"service-deploy.git", "service-deploy/").Replace(validSync)
	c := strings.NewReplacer("guestbook-dev", "c", "path: apps/guestbook", "path: apps/guestbook-2").Replace(validSync)
	d := strings.NewReplacer("guestbook-dev", "d", "branch: env/dev", "branch: env/prod").Replace(validSync)
	write(t, dir, "a.yaml", a)
	write(t, dir, "b.yaml", b)
	write(t, dir, "c.yaml", c+"---\n"+d)
	_, err := Load(dir)
	if err == nil {
		t.Fatal("Load succeeded, want an overlap error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 1 {
		t.Fatalf("want exactly one error, got:\n%s", err)
	}
	for _, want := range []string{"b.yaml:24: ManifestSync b: spec.destination.path:", `"apps/guestbook/sub" is inside "apps/guestbook"`, "ManifestSync a (", "a.yaml:24)"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("error %q does not contain %q", lines[0], want)
		}
	}
}

func TestLoadRejectsDuplicateNames(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", validSync)
	write(t, dir, "b.yaml", strings.Replace(validSync, "apps/guestbook", "apps/other", 1))
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "b.yaml:4: ManifestSync guestbook-dev: metadata.name: duplicate name: also declared at") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadRefusesAliasBombs(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata:\n  name: bomb\n  labels: {a0: &a0 x}\nx0: &x0 [\"lol\"]\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "x%d: &x%d [*x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d, *x%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("spec: {source: {repo: .}, destination: {branch: main, path: a}, images: [{name: *x12}]}\n")
	p := filepath.Join(dir, "bomb.yaml")
	os.WriteFile(p, []byte(b.String()), 0o644)
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "aliases expand to more than") {
		t.Fatalf("err = %v", err)
	}
}
