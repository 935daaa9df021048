package controller

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/testenv"
)

// The alerts (config/monitoring/rules.yaml) and the Grafana dashboard
// (config/monitoring/dashboard.json) query only metrics a running
// controller exports: each name in their expressions is on the
// controller's /metrics after it has hydrated a sync, or is one of
// Sluice's own collectors (a labelled metric appears once it has a
// series), or Prometheus's own `up`.
func TestTheMonitoringNamesOnlyExportedMetrics(t *testing.T) {
	e := newEnv(t)
	addrs, _ := e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	exported := map[string]bool{"up": true}
	for series := range scrape(t, addrs.Metrics) {
		name, _, _ := strings.Cut(series, "{")
		exported[name] = true
	}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		name := fq.FindStringSubmatch(d.String())[1]
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			exported[name+suffix] = true
		}
	}

	root, err := testenv.SourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string][]string{}
	rules, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For    string
				Labels, Annotations map[string]string
			}
		}
	}
	if err := yaml.UnmarshalStrict(rules, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			queries["rules.yaml: "+r.Alert] = append(queries["rules.yaml: "+r.Alert], r.Expr)
		}
	}
	dash, err := os.ReadFile(filepath.Join(root, "config", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries["dashboard.json: "+p.Title] = append(queries["dashboard.json: "+p.Title], tg.Expr)
		}
	}
	if len(queries) < 20 {
		t.Fatalf("read %d alerts and panels: the files' form changed", len(queries))
	}
	named := 0
	for where, exprs := range queries {
		for _, expr := range exprs {
			names := metricNames(expr)
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", where, expr)
			}
			for _, n := range names {
				named++
				if !exported[n] {
					t.Errorf("%s: %q queries %s, which the controller does not export", where, expr, n)
				}
			}
		}
	}
	if named < 30 {
		t.Errorf("only %d metric names found in the queries", named)
	}
}

// metricNames are the metric names a PromQL expression selects: its
// identifiers less label matchers, grouping labels, ranges, functions
// and keywords.
func metricNames(expr string) []string {
	for _, re := range []string{`"[^"]*"`, `\{[^}]*\}`, `\[[^\]]*\]`, `\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`} {
		expr = regexp.MustCompile(re).ReplaceAllString(expr, " ")
	}
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
	var out []string
	for _, m := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`).FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") || keywords[strings.ToLower(m)] {
			continue
		}
		out = append(out, m)
	}
	return out
}
