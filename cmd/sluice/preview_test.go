package main

import (
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

// `sluice preview` as a CI job runs it: Markdown on stdout, and an exit
// code that says whether anything changes, or fails.
func TestPreviewCLIPrintsMarkdownAndExitsBySomethingChanging(t *testing.T) {
	syncs, srv, cache := cliFixture(t)
	if out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache); code != 0 {
		t.Fatalf("hydrate: exit %d\n%s%s", code, out, errs)
	}
	w := testenv.NewWork(t, srv.URL("app"))
	testenv.Git(t, w.Dir, "fetch", "-q", "origin", "main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "edit", "FETCH_HEAD")
	w.Write(map[string]string{"k/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"2\"}\n"}).Commit("a is 2")
	w.Push("edit")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "docs", "FETCH_HEAD")
	w.Write(map[string]string{"README.md": "# app\n"}).Commit("docs")
	w.Push("docs")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "fork", "FETCH_HEAD")
	w.Write(map[string]string{"k/kustomization.yaml": "resources: [cm.yaml, missing.yaml]\n"}).Commit("broken")
	w.Push("fork:refs/pull/3/head")

	preview := func(head string, more ...string) (string, string, int) {
		return run(t, append([]string{"preview", "-f", syncs, "--cache-dir", cache, "--base", "main", "--head", head}, more...)...)
	}
	out, errs, code := preview("edit")
	if code != 1 {
		t.Fatalf("a change: exit %d, want 1\n%s%s", code, out, errs)
	}
	for _, want := range []string{"### Sluice: 2 folders change", "| ✏️ | one | `apps/one` | 0 | 1 | 0 | 0 |", "| ✏️ | two | `apps/two` | 0 | 1 | 0 | 0 |", "-  a: \"1\"", "+  a: \"2\""} {
		if !strings.Contains(out, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, out)
		}
	}
	if out, errs, code := preview("docs"); code != 0 || !strings.Contains(out, "nothing deployable changes") {
		t.Errorf("nothing: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = preview("refs/pull/3/head", "--untrusted")
	if code != 2 || !strings.Contains(out, "❌") || !strings.Contains(out, "missing.yaml") || !strings.Contains(errs, "2 renders fail") {
		t.Errorf("a failing render: exit %d, want 2\n%s%s", code, out, errs)
	}
	if _, errs, code := run(t, "preview", "-f", syncs, "--base", "main"); code != 2 || !strings.Contains(errs, "--head") {
		t.Errorf("no head: exit %d\n%s", code, errs)
	}
}
