package render

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestLimitsStopARenderAndSayHowToRaiseThem(t *testing.T) {
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {a: b}\n"
	}
	many := ""
	for i := 0; i < 30; i++ {
		many += "---\n" + cm(fmt.Sprint("cm-", i))
	}
	chart := func(tpl string) mapFS {
		return mapFS{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/templates/t.yaml": tpl}
	}
	tests := []struct {
		name   string
		files  mapFS
		dir    string
		limits Limits
		want   string
	}{
		{"a file over the file limit", mapFS{"p/big.yaml": cm("big") + "# " + strings.Repeat("x", 2000) + "\n"}, "p",
			Limits{FileBytes: 1000}, "file p/big.yaml (2.0 KiB): over the limit of 1000 bytes per file; raise it with --max-file-size"},
		{"files over the read limit", mapFS{"k/kustomization.yaml": "resources: [a.yaml, b.yaml]\n", "k/a.yaml": cm("a"), "k/b.yaml": cm("b")}, "k",
			Limits{ReadBytes: 100}, "over the limit of 100 bytes per render; raise it with --max-read-size"},
		{"too many objects", mapFS{"p/all.yaml": many}, "p", Limits{Objects: 10}, "the objects rendered (more than 10, with p/all.yaml): over the limit of 10; raise it with --max-objects"},
		{"too much output", mapFS{"k/kustomization.yaml": "resources: [all.yaml]\n", "k/all.yaml": many}, "k", Limits{OutputBytes: 500}, "raise it with --max-output-size"},
		{"a chart ranging over a billion", chart("{{ range until 1000000000 }}x{{ end }}"), "c", Limits{}, "until: 1000000000 items, more than a render may produce"},
		{"a chart doubling a string", chart("{{ $x := \"xx\" }}{{ range until 60 }}{{ $x = print $x $x }}{{ end }}"), "c", Limits{OutputBytes: 1 << 20}, "print: "},
		{"a chart asking for a gigabyte of random letters", chart("{{ randAlphaNum 1000000000 }}"), "c", Limits{}, "randAlphaNum: 1000000000 bytes"},
		{"a chart repeating", chart("{{ repeat 1000000000 \"abc\" }}"), "c", Limits{}, "repeat: 3000000000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(context.Background(), tt.files.fs(), tt.dir, Options{ReleaseName: "r", Limits: tt.limits})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRenderPastItsTimeoutReturnsAtOnce(t *testing.T) {
	many := ""
	for i := 0; i < 3000; i++ {
		many += fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\n", i)
	}
	files := mapFS{"k/kustomization.yaml": "namePrefix: p-\nresources: [all.yaml]\n", "k/all.yaml": many}
	start := time.Now()
	if _, err := Render(context.Background(), files.fs(), "k", Options{}); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(start)
	start = time.Now()
	_, err := Render(context.Background(), files.fs(), "k", Options{Limits: Limits{Timeout: time.Millisecond}})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "raise the limit with --render-timeout") {
		t.Fatalf("err = %v", err)
	}
	// At once: not after the render it abandons (a generous bound, for a
	// busy machine: a quarter of the whole render).
	if took := time.Since(start); took > whole/4 {
		t.Errorf("returned after %s, the whole render takes %s", took, whole)
	}
	// A cancelled caller gets its own error, not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Render(ctx, files.fs(), "k", Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestAliasesAreExpandedIntoPlainYAML(t *testing.T) {
	files := mapFS{
		"p/cm.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: &labels {app: web, tier: front}\n  annotations:\n    <<: *labels\n    extra: x\ndata: {copy: *labels}\n",
		"c/Chart.yaml":        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  labels: &l {app: web}\n  annotations: *l\n",
	}
	for _, dir := range []string{"p", "c"} {
		res, err := Render(context.Background(), files.fs(), dir, Options{ReleaseName: "r"})
		if err != nil {
			t.Fatal(err)
		}
		out := objects(t, res)[0].MustString()
		if strings.ContainsAny(out, "&*") || strings.Contains(out, "<<") {
			t.Errorf("%s: aliases left in the output:\n%s", dir, out)
		}
		if a, _ := objects(t, res)[0].GetString("metadata.annotations.app"); a != "web" {
			t.Errorf("%s: alias not expanded:\n%s", dir, out)
		}
	}
}
