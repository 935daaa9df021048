package render

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// secret is what the files outside the source hold: no error or output may
// ever show it.
const secret = "stolen-token-8c1f"

// attackerRepo is a repository an attacker wrote: a clone on disk whose
// symbolic links reach for this machine's files, other repositories beside
// it, and its own .git, through every file kind a renderer reads.
func attackerRepo(t *testing.T) (worktree string) {
	t.Helper()
	machine := t.TempDir()
	// Beside the clone: another repository's secret, and a user's ~/.ssh.
	for name, content := range map[string]string{
		"other-repo/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: other}\nstringData: {token: " + secret + "}\n",
		"home/.ssh/id_rsa":       "-----BEGIN " + secret + "-----\n",
	} {
		p := filepath.Join(machine, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w := testenv.NewWork(t, "")
	// The clone sits at machine/clone, so "../other-repo" leaves it.
	clone := filepath.Join(machine, "clone")
	if err := os.Rename(w.Dir, clone); err != nil {
		t.Fatal(err)
	}
	w.Dir = clone
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {a: b}\n"
	}
	w.Write(map[string]string{
		"k/passwd/kustomization.yaml":       "resources: [passwd.yaml]\n",
		"k/ssh/kustomization.yaml":          "configMapGenerator:\n- name: keys\n  files: [id_rsa]\n",
		"k/sibling/kustomization.yaml":      "resources: [secret.yaml]\n",
		"k/gitconfig/kustomization.yaml":    "configMapGenerator:\n- name: git\n  files: [config]\n",
		"k/patch/kustomization.yaml":        "resources: [cm.yaml]\npatches:\n- path: patch.yaml\n",
		"k/patch/cm.yaml":                   cm("a"),
		"k/base-escape/kustomization.yaml":  "resources: [../../outside-base]\n",
		"k/fine/kustomization.yaml":         "resources: [link.yaml, ../shared]\n",
		"k/fine/real.yaml":                  cm("fine"),
		"k/shared/kustomization.yaml":       "resources: [cm.yaml]\n",
		"k/shared/cm.yaml":                  cm("shared"),
		"chart/Chart.yaml":                  "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
		"chart/templates/cm.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  files: {{ .Files.Get \"leak.txt\" | quote }}\n",
		"valueschart/Chart.yaml":            "apiVersion: v2\nname: valueschart\nversion: 0.1.0\n",
		"valueschart/templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: v}\ndata: {v: {{ .Values.v | quote }}}\n",
		"depchart/Chart.yaml":               "apiVersion: v2\nname: depchart\nversion: 0.1.0\ndependencies: [{name: dep, version: 0.1.0}]\n",
		"elsewhere/dep/Chart.yaml":          "apiVersion: v2\nname: dep\nversion: 0.1.0\n",
		"elsewhere/dep/templates/cm.yaml":   cm("dep"),
		"schemachart/Chart.yaml":            "apiVersion: v2\nname: schemachart\nversion: 0.1.0\n",
		"schemachart/values.schema.json":    `{"$ref": "file:///etc/passwd"}`,
		"schemachart/templates/cm.yaml":     cm("s"),
		"netschemachart/Chart.yaml":         "apiVersion: v2\nname: netschemachart\nversion: 0.1.0\n",
		"netschemachart/values.schema.json": `{"properties": {"a": {"$ref": "http://169.254.169.254/latest/meta-data"}}}`,
		"netschemachart/templates/cm.yaml":  cm("n"),
		"plain/cm.yaml":                     cm("plain"),
		"cleanchart/Chart.yaml":             "apiVersion: v2\nname: cleanchart\nversion: 0.1.0\n",
		"cleanchart/templates/cm.yaml":      cm("clean"),
	})
	w.Link(map[string]string{
		"k/passwd/passwd.yaml":    "/etc/passwd",
		"k/ssh/id_rsa":            "../../../home/.ssh/id_rsa",
		"k/sibling/secret.yaml":   "../../../other-repo/secret.yaml",
		"k/gitconfig/config":      "../../.git/config",
		"k/patch/patch.yaml":      "../../../other-repo/secret.yaml",
		"k/fine/link.yaml":        "real.yaml",
		"chart/leak.txt":          "../../home/.ssh/id_rsa",
		"valueschart/values.yaml": "../../other-repo/secret.yaml",
		"depchart/charts/dep":     "../../elsewhere/dep",
		"plain/secret.yaml":       "../k/sibling/secret.yaml",
		"plain/other.yaml":        "../../other-repo/secret.yaml",
	})
	w.Commit("attack")
	return clone
}

func TestNothingOutsideTheSourceIsRead(t *testing.T) {
	clone := attackerRepo(t)
	repo, err := source.NewCache(t.TempDir()).Open(context.Background(), mustLocation(t, clone), source.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Tree(c)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := source.Dir(clone)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	tests := []struct {
		name, dir string
		want      []string // all in the error
	}{
		{"kustomize resource linked to /etc/passwd", "k/passwd", []string{"k/passwd/passwd.yaml", "/etc/passwd"}},
		{"kustomize generator file linked to ~/.ssh", "k/ssh", []string{"k/ssh/id_rsa", "../../../home/.ssh/id_rsa"}},
		{"kustomize resource linked to another repository", "k/sibling", []string{"k/sibling/secret.yaml", "../../../other-repo/secret.yaml"}},
		{"kustomize generator file linked to .git/config", "k/gitconfig", []string{"k/gitconfig/config", "../../.git/config"}},
		{"kustomize patch linked out", "k/patch", []string{"k/patch/patch.yaml", "../../../other-repo/secret.yaml"}},
		{"kustomize base outside the source", "k/base-escape", []string{"outside-base"}},
		{"chart file linked to ~/.ssh", "chart", []string{"chart/leak.txt", "../../home/.ssh/id_rsa"}},
		{"chart values.yaml linked to another repository", "valueschart", []string{"valueschart/values.yaml", "../../other-repo/secret.yaml"}},
		{"chart dependency linked outside the chart", "depchart", []string{"depchart/charts/dep", "../../elsewhere/dep", "outside the chart's folder depchart"}},
		{"chart schema referring to /etc/passwd", "schemachart", []string{"values.schema.json refers to etc/passwd"}},
		{"chart schema referring to the metadata service", "netschemachart", []string{"values.schema.json refers to http://169.254.169.254/latest/meta-data"}},
		{"plain file linked out of its folder", "plain", []string{"plain/other.yaml", "../../other-repo/secret.yaml"}},
	}
	for _, fsys := range []struct {
		kind string
		fs   source.FS
	}{{"commit", tree}, {"working tree", dir}} {
		for _, tt := range tests {
			t.Run(fsys.kind+"/"+tt.name, func(t *testing.T) {
				res, err := Render(context.Background(), fsys.fs, tt.dir, Options{ReleaseName: "r"})
				if err == nil {
					out := ""
					for _, o := range objects(t, res) {
						out += o.MustString()
					}
					t.Fatalf("rendered:\n%s", out)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows what is outside the source: %v", err)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
			})
		}
		t.Run(fsys.kind+"/links inside the source keep working", func(t *testing.T) {
			res, err := Render(context.Background(), fsys.fs, "k/fine", Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(ids(objects(t, res)), " "); got != "ConfigMap//fine ConfigMap//shared" {
				t.Errorf("objects = %s", got)
			}
		})
	}
	// A values file a sync names is held to the source too.
	for _, fsys := range []source.FS{tree, dir} {
		_, err := Render(context.Background(), fsys, "cleanchart", Options{ReleaseName: "r", Render: &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ValuesFiles: []string{"../plain/other.yaml"}}}})
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "plain/other.yaml") {
			t.Errorf("values file linked out: %v", err)
		}
	}
}

func mustLocation(t *testing.T, path string) source.Location {
	t.Helper()
	loc, err := source.ParseLocation(path, "")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
