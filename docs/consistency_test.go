package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The generated references (docs/reference, from the code) and the pages
// that repeat what they say agree: a flag's default a page gives is the
// flag's default, a metric a page names is exported, a page that lists
// the reasons of Ready lists all of them, and the troubleshooting page
// says what to do about every reason.
func TestThePagesAgreeWithTheReference(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	defaults := flagDefaults(read("docs/reference/cli.md"))
	metrics := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(sluice_[a-z_]+)`").FindAllStringSubmatch(read("docs/reference/metrics.md"), -1) {
		metrics[m[1]] = true
	}
	var reasons []string
	for _, m := range regexp.MustCompile("(?m)^\\| `Reason[A-Za-z]+` \\| `([A-Za-z]+)`").FindAllStringSubmatch(read("docs/reference/status.md"), -1) {
		reasons = append(reasons, m[1])
	}
	if len(defaults) < 20 || len(metrics) < 10 || len(reasons) < 5 {
		t.Fatalf("read %d flags, %d metrics, %d reasons from docs/reference: the tables' form changed", len(defaults), len(metrics), len(reasons))
	}

	// "`--flag` (default 5m", "`--flag`, default 1Gi", "`--flag`, 256Mi",
	// "`--flag` (2 minutes": a default a page states.
	stated := regexp.MustCompile("`(--[a-z0-9-]+)`(?:\\s*\\(|,\\s*)(?:default:?\\s+)?`?([0-9][0-9A-Za-z.]*)`?(\\s+minutes?|\\s+min\\b|\\s+seconds?)?")
	metric := regexp.MustCompile("\\bsluice_[a-z_]+[a-z]\\b")
	checked := 0
	for _, file := range markdown(t, root) {
		rel, _ := filepath.Rel(root, file)
		if strings.HasPrefix(rel, filepath.Join("docs", "reference")) || rel == "CHANGELOG.md" || rel == "BENCHMARKS.md" {
			continue
		}
		text := read(rel)
		for _, m := range stated.FindAllStringSubmatch(text, -1) {
			flag, val := m[1], m[2]
			switch strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[3]), "s")) {
			case "minute", "min":
				val += "m"
			case "second":
				val += "s"
			}
			want, ok := defaults[flag]
			if !ok {
				t.Errorf("%s: %s is not a flag of any command (docs/reference/cli.md)", rel, flag)
				continue
			}
			checked++
			if !sameValue(val, want) {
				t.Errorf("%s: says %s defaults to %s; the command line's default is %s", rel, flag, val, strings.Join(want, " or "))
			}
		}
		for _, name := range metric.FindAllString(text, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
			if !metrics[base] && !strings.HasSuffix(base, "_") {
				t.Errorf("%s: names the metric %s, which Sluice does not export (docs/reference/metrics.md)", rel, name)
			}
		}
		// A paragraph or list item naming three reasons or more lists them
		// all, or it is a partial list a reader takes for the whole.
		for _, para := range regexp.MustCompile(`\n\s*\n|\n- |\n\| `).Split(text, -1) {
			var named []string
			for _, r := range reasons {
				if strings.Contains(para, "`"+r+"`") {
					named = append(named, r)
				}
			}
			if len(named) >= 3 && len(named) < len(reasons) {
				t.Errorf("%s: lists the reasons %s, %d of the %d of docs/reference/status.md: list all or link it\n%s", rel, strings.Join(named, ", "), len(named), len(reasons), para)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d defaults stated in the pages were checked: the pattern no longer finds them", checked)
	}
	trouble := read("docs/troubleshooting.md")
	for _, r := range reasons {
		if !regexp.MustCompile("(?m)^\\| `" + r + "` \\|").MatchString(trouble) {
			t.Errorf("docs/troubleshooting.md does not say what the reason %s means and what to do about it", r)
		}
	}
}

// flagDefaults reads each flag's defaults from the command reference's
// tables (a flag of several commands may have several).
func flagDefaults(cli string) map[string][]string {
	out := map[string][]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(--[a-z0-9-]+)` \\| [a-zA-Z0-9]+ \\| `([^`]*)` \\|").FindAllStringSubmatch(cli, -1) {
		if !strings.Contains(strings.Join(out[m[1]], "\x00"), m[2]) {
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	return out
}

// sameValue compares a value a page states with a flag's defaults, as
// durations, quantities or words.
func sameValue(stated string, defaults []string) bool {
	for _, d := range defaults {
		if stated == d {
			return true
		}
		if a, err := time.ParseDuration(stated); err == nil {
			if b, err := time.ParseDuration(d); err == nil && a == b {
				return true
			}
		}
		if a, err := resource.ParseQuantity(stated); err == nil {
			if b, err := resource.ParseQuantity(d); err == nil && a.Cmp(b) == 0 {
				return true
			}
		}
	}
	return false
}
