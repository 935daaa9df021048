package render

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// grafanaWith renders grafana as published, with the sync key, and with
// extra templates added to it.
func grafanaWith(t *testing.T, extra map[string]string) (*Result, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "grafana"), os.DirFS(testenv.Chart(t, "grafana"))); err != nil {
		t.Fatal(err)
	}
	for name, text := range extra {
		if err := os.WriteFile(filepath.Join(dir, "grafana", "templates", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := source.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	return Render(context.Background(), fsys, "grafana", Options{
		Render:   &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ReleaseName: "grafana", Namespace: "monitoring"}},
		Generate: testKey,
	})
}

// adminPassword is the password grafana's Secret holds.
func adminPassword(t *testing.T, res *Result) string {
	t.Helper()
	for _, o := range res.Objects {
		if o.GetKind() == "Secret" && o.GetName() == "grafana" {
			return data(t, []*yaml.RNode{o}, "grafana", "admin-password")
		}
	}
	t.Fatal("grafana rendered no Secret grafana")
	return ""
}

// A template of a branch that says it is grafana's secret.yaml, to be
// given the values that template is given and print the admin password
// into a ConfigMap, fails, naming itself; before, it printed the
// password main's Secret holds.
func TestATemplateCannotSayWhichTemplateItIs(t *testing.T) {
	main, err := grafanaWith(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	password := adminPassword(t, main)
	const printIt = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata:\n  password: {{ include \"grafana.password\" . }}\n"
	for name, claim := range map[string]string{
		"the naming function as it was":    `{{- __sluice_template "grafana/templates/secret.yaml" }}`,
		"the naming function with a guess": `{{- __sluice_enter "00000000000000000000000000000000" "grafana/templates/secret.yaml" }}`,
		"leaving the template it is":       `{{- __sluice_leave "00000000000000000000000000000000" }}`,
	} {
		t.Run(name, func(t *testing.T) {
			res, err := grafanaWith(t, map[string]string{"z-leak.yaml": claim + "\n" + printIt})
			if err == nil {
				for _, o := range res.Objects {
					if o.GetKind() == "ConfigMap" && o.GetName() == "leak" {
						if strings.Contains(o.MustString(), password) || strings.Contains(o.MustString(), base64.StdEncoding.EncodeToString([]byte(password))) {
							t.Fatal("the branch's template printed main's admin password")
						}
					}
				}
				t.Fatal("the template that names itself another rendered")
			}
			if !strings.Contains(err.Error(), "z-leak.yaml") || strings.Contains(err.Error(), password) {
				t.Errorf("error: %v", err)
			}
		})
	}
}

// Every value a template generates is registered as it is made, through
// whatever path it takes (a named template, a whole template included),
// and a template's fail message never shows one.
func TestEveryGeneratedValueIsRegistered(t *testing.T) {
	res, err := grafanaWith(t, map[string]string{
		"z-leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata:\n  whole: {{ include \"grafana/templates/secret.yaml\" . | quote }}\n  mine: {{ randAlphaNum 24 }}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	password := adminPassword(t, res)
	set := mask.New(res.Values...)
	if _, ok := set.Find(password); !ok {
		t.Errorf("the admin password is not registered (%d values are)", len(res.Values))
	}
	for _, o := range res.Objects {
		if o.GetName() == "leak" {
			text := o.MustString()
			if _, ok := set.Find(text); !ok {
				t.Errorf("the ConfigMap that prints them holds no registered value:\n%s", text)
			}
			if got := set.String(text); strings.Contains(got, password) || strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(password))) {
				t.Errorf("masked, it still shows the password:\n%s", got)
			}
		}
	}
	for _, fn := range []string{`fail (include "grafana.password" .)`, `required (printf "%s is wrong" (randAlphaNum 30)) .Values.nothing`, `fail (randAlphaNum 30 | b64enc | b64enc)`} {
		_, err := grafanaWith(t, map[string]string{"f.yaml": "{{ " + fn + " }}\n"})
		if err == nil || !strings.Contains(err.Error(), mask.Token) {
			t.Errorf("%s: %v", fn, err)
		}
	}
}
