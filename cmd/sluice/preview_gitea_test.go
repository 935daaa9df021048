package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/review"
	"sluice.dev/sluice/internal/testenv"
)

// A source pull request on a real Gitea, previewed by `sluice preview
// --pull` as a CI job runs it at each push: one comment, edited in place
// and right each time; the commit status on each head, failing when a
// render fails; a fork's pull request that reads a file outside the
// repository fails, and shows none of it.
func TestPreviewPostsOneCommentAndTheStatusOnGitea(t *testing.T) {
	g := testenv.StartGitea(t)
	srcURL, dstURL := g.CreateRepo(t, "src"), g.CreateRepo(t, "deploy")
	w := testenv.NewWork(t, g.PushURL(srcURL))
	w.Write(map[string]string{
		"k/kustomization.yaml": "resources: [cm.yaml]\n",
		"k/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"1\"}\n",
	}).Commit("init")
	w.Push("main")
	syncs := t.TempDir()
	y := fmt.Sprintf("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: web}\nspec:\n  source: {repo: %s, ref: main, path: k}\n  destination: {repo: %s, branch: env/dev, path: apps/web}\n", srcURL, dstURL)
	if err := os.WriteFile(filepath.Join(syncs, "web.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_GIT_USERNAME", g.User)
	t.Setenv("SLUICE_GIT_PASSWORD", g.Password)
	cache := t.TempDir()
	if out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache); code != 0 {
		t.Fatalf("hydrate: exit %d\n%s%s", code, out, errs)
	}

	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "change")
	head1 := w.Write(map[string]string{"k/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"2\"}\n"}).Commit("a is 2")
	w.Push("change")
	var pr struct{ Number int }
	pr.Number = g.OpenPullRequest(t, g.User, g.Password, "src", "change", "main", "a is 2")
	preview := func(number int, more ...string) (string, string, int) {
		args := []string{"preview", "-f", syncs, "--cache-dir", cache, "--base", "main", "--head", fmt.Sprintf("refs/pull/%d/head", number), "--pull", fmt.Sprint(number), "--forge", "gitea"}
		return run(t, append(args, more...)...)
	}
	comments := func(number int) []string {
		var cs []struct {
			Body string `json:"body"`
			User struct {
				Login string `json:"login"`
			} `json:"user"`
		}
		g.API(t, http.MethodGet, fmt.Sprintf("repos/%s/src/issues/%d/comments", g.User, number), nil, &cs)
		var out []string
		for _, c := range cs {
			out = append(out, c.User.Login+": "+c.Body)
		}
		return out
	}
	// The latest status of Sluice's context, as Gitea's combined status
	// of the commit has it.
	status := func(sha string) string {
		var combined struct {
			Statuses []struct {
				Context, Status, Description string
			} `json:"statuses"`
		}
		g.API(t, http.MethodGet, fmt.Sprintf("repos/%s/src/commits/%s/status", g.User, sha), nil, &combined)
		for _, s := range combined.Statuses {
			if s.Context == review.StatusContext {
				return s.Status + ": " + s.Description
			}
		}
		return "none"
	}

	if out, errs, code := preview(pr.Number); code != 1 {
		t.Fatalf("first push: exit %d\n%s%s", code, out, errs)
	}
	if got := status(head1); got != "success: 1 folder changes" {
		t.Errorf("the first head's status: %s", got)
	}
	// The second push: the same comment, now saying a is 3.
	head2 := w.Write(map[string]string{"k/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: \"3\"}\n"}).Commit("a is 3")
	w.Push("change")
	if out, errs, code := preview(pr.Number); code != 1 {
		t.Fatalf("second push: exit %d\n%s%s", code, out, errs)
	}
	cs := comments(pr.Number)
	if len(cs) != 1 || !strings.HasPrefix(cs[0], g.User+": "+review.Marker) || !strings.Contains(cs[0], `+  a: "3"`) || strings.Contains(cs[0], `+  a: "2"`) {
		t.Fatalf("after two pushes the comments are %q: one, saying a is 3, is wanted", cs)
	}
	if got := status(head2); got != "success: 1 folder changes" {
		t.Errorf("the second head's status: %s", got)
	}
	// A push that breaks the render fails the status.
	head3 := w.Write(map[string]string{"k/kustomization.yaml": "resources: [cm.yaml, gone.yaml]\n"}).Commit("broken")
	w.Push("change")
	if out, errs, code := preview(pr.Number); code != 2 {
		t.Fatalf("a broken render: exit %d\n%s%s", code, out, errs)
	}
	if got := status(head3); got != "failure: 1 render fails" {
		t.Errorf("the broken head's status: %s", got)
	}
	if cs := comments(pr.Number); len(cs) != 1 || !strings.Contains(cs[0], "gone.yaml") {
		t.Errorf("comments %q", cs)
	}

	// A fork's pull request that reads the machine's files.
	g.CreateUser(t, "mallory", "Mallory-test-1")
	f := testenv.NewWork(t, g.Fork(t, "mallory", "Mallory-test-1", "src"))
	testenv.Git(t, f.Dir, "fetch", "-q", "origin", "main")
	testenv.Git(t, f.Dir, "checkout", "-q", "-b", "steal", "FETCH_HEAD")
	forkHead := f.Write(map[string]string{"k/kustomization.yaml": "resources: [cm.yaml]\nconfigMapGenerator:\n- name: stolen\n  files: [/etc/passwd]\n"}).Commit("innocent")
	f.Push("steal")
	fpr := g.OpenPullRequest(t, "mallory", "Mallory-test-1", "src", "mallory:steal", "main", "innocent")
	out, errs, code := preview(fpr, "--untrusted", "--head-commit", forkHead)
	if code != 2 {
		t.Fatalf("the fork's pull request: exit %d\n%s%s", code, out, errs)
	}
	cs = comments(fpr)
	if len(cs) != 1 || !strings.Contains(cs[0], "/etc/passwd") || strings.Contains(cs[0], "root:") {
		t.Errorf("the fork's comments: %q", cs)
	}
	if got := status(forkHead); got != "failure: 1 render fails" {
		t.Errorf("the fork's head's status: %s", got)
	}
	if strings.Contains(out+errs, "root:") {
		t.Errorf("the output shows the file:\n%s%s", out, errs)
	}
}
