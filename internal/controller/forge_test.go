package controller

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// giteaWeb starts a Gitea and a controller, with the web app's sources
// in the Gitea repository web (its clone URL, and a working clone).
func giteaWeb(t *testing.T) (*testenv.Gitea, *env, Addrs, string, *testenv.Work) {
	t.Helper()
	g := testenv.StartGitea(t)
	e := newEnv(t)
	addrs, _ := e.start(func(o *Options) { o.DashboardURL = "https://sluice.example.com/" })
	url := g.CreateRepo(t, "web")
	w := testenv.NewWork(t, g.PushURL(url))
	w.Write(map[string]string{"deploy/web/deployment.yaml": e.expand(deployment, "web")}).Commit("web")
	w.Push("main")
	return g, e, addrs, url, w
}

// A real forge: a sync reads a Gitea repository; a push to it makes Gitea
// deliver its own signed webhook (one of type gitea, one of type gogs),
// and the destination holds the change at once, though the sync's
// interval is an hour.
func TestGiteaPushWebhook(t *testing.T) {
	t.Parallel()
	g, e, addrs, url, w := giteaWeb(t)
	e.receiver("gitea", "gitea-s3cret")
	e.receiver("gogs", "gogs-s3cret")
	g.AddWebhook(t, "web", "gitea", "http://"+addrs.Hook+"/hook/"+e.ns+"/gitea", "gitea-s3cret")
	e.apply(strings.Replace(webSync, "repo: APP,", "repo: "+url+",", 1))
	e.ready("web", metav1.ConditionTrue, 60*time.Second)

	push := func(value string) {
		t.Helper()
		w.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: '" + value + "'}\n"}).Commit(value)
		w.Push("main")
		e.eventually(30*time.Second, func() string {
			if !strings.Contains(e.dst("show", "env/dev:apps/web/configmap-web.yaml"), "v: '"+value+"'") {
				return "the destination does not hold " + value + " (Gitea's webhook did not land)"
			}
			return ""
		})
	}
	push("1")
	g.AddWebhook(t, "web", "gogs", "http://"+addrs.Hook+"/hook/"+e.ns+"/gogs", "gogs-s3cret")
	push("2")
	// Both receivers took Gitea's deliveries, signatures checked.
	e.eventually(30*time.Second, func() string {
		logs := e.logs.tail(100000)
		for _, r := range []string{"gitea", "gogs"} {
			if !strings.Contains(logs, "msg=webhook receiver="+e.ns+"/"+r+" ") {
				return "no delivery accepted by receiver " + r
			}
		}
		if strings.Contains(logs, "webhook refused") {
			return "a Gitea delivery was refused"
		}
		return ""
	})
	// The status follows the push that landed (it is written just after).
	e.eventually(10*time.Second, func() string {
		if got := e.sync("web").Status.Source.Commit; got != w.Head() {
			return fmt.Sprintf("status.source.commit %s, want %s", got, w.Head())
		}
		return ""
	})
}

// pullRequest mode under the controller, on a real Gitea: the sync waits
// in an open pull request (Ready false, saying where), and its merge makes
// it Ready at the merge commit.
func TestPullRequestModeOnGitea(t *testing.T) {
	t.Parallel()
	g := testenv.StartGitea(t)
	e := newEnv(t)
	e.start()
	dstURL := g.CreateRepo(t, "deploy")
	d := testenv.NewWork(t, g.PushURL(dstURL))
	d.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	d.Push("main")
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea", Namespace: e.ns},
		StringData: map[string]string{"username": g.User, "password": g.Password}}); err != nil {
		t.Fatal(err)
	}
	e.apply(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination:
    repo: ` + dstURL + `
    branch: main
    path: apps/web
    mode: pullRequest
    pullRequest: {forge: gitea, labels: [sluice]}
    secretRef: {name: gitea}
  interval: 1h
  prune: true
`)
	// (Gitea answers 404 for a repository's pull requests for a moment
	// after its first push: the controller retries.)
	e.eventually(60*time.Second, func() string {
		if c := readyCondition(e.sync("web").Status.Conditions); c == nil || c.Reason != "PullRequestOpen" {
			return fmt.Sprintf("not waiting for review: %+v", c)
		}
		return ""
	})
	ms := e.sync("web")
	pr := ms.Status.PullRequest
	ready := readyCondition(ms.Status.Conditions)
	if pr == nil || pr.State != "open" || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, pr.URL) {
		t.Fatalf("waiting for review: %+v, %+v", pr, ready)
	}
	if ms.Status.Destination.Branch != "sluice/pr/main" || ms.Status.Destination.Commit != g.Head(t, dstURL, "sluice/pr/main") {
		t.Errorf("status.destination while open: %+v", ms.Status.Destination)
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "PullRequestOpened") })

	g.Merge(t, "deploy", pr.Number)
	e.requestReconcile(ms, "merged")
	e.eventually(30*time.Second, func() string {
		ms := e.sync("web")
		st := ms.Status
		if c := readyCondition(st.Conditions); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("not Ready after the merge: %+v", c)
		}
		main := g.Head(t, dstURL, "main")
		if st.PullRequest == nil || st.PullRequest.State != "merged" || st.PullRequest.MergeCommit != main || st.Destination.Commit != main || st.Destination.Branch != "main" {
			return fmt.Sprintf("after the merge: %+v %+v (main %s)", st.PullRequest, st.Destination, main)
		}
		return ""
	})
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "PullRequestMerged") })

	// Deleted with prune: its folder's removal is proposed, not pushed.
	if err := e.c.Delete(context.Background(), e.sync("web")); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, func() string {
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "web"}, &v1alpha1.ManifestSync{}); err == nil {
			return "the sync is still there"
		}
		return ""
	})
	main := g.Head(t, dstURL, "main")
	if out := testenv.Git(t, "", "ls-remote", dstURL, "refs/heads/sluice/pr/main"); out == "" {
		t.Fatal("no proposal to remove the folder")
	}
	testenv.Git(t, d.Dir, "fetch", "-q", "origin", "main", "sluice/pr/main")
	if files := testenv.Git(t, d.Dir, "ls-tree", "-r", "--name-only", "origin/main"); !strings.Contains(files, "apps/web/") {
		t.Errorf("main lost apps/web without review (at %s):\n%s", main, files)
	}
	if files := testenv.Git(t, d.Dir, "ls-tree", "-r", "--name-only", "origin/sluice/pr/main"); strings.Contains(files, "apps/web/") {
		t.Errorf("the proposal keeps apps/web:\n%s", files)
	}
}

// Previews of source pull requests under the controller, on a real
// Gitea delivering its own signed webhooks: a pull request opened and
// pushed to twice has one comment, edited each time and right, and the
// sluice/preview status on each head; a push that breaks the render fails
// the status; a fork's pull request whose kustomization reads the
// controller's files fails, showing none of it; closing is answered and
// ignored.
func TestSourcePullRequestPreviewsOnGitea(t *testing.T) {
	t.Parallel()
	g, e, addrs, url, w := giteaWeb(t)
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea", Namespace: e.ns},
		StringData: map[string]string{"username": g.User, "password": g.Password}}); err != nil {
		t.Fatal(err)
	}
	e.apply(strings.Replace(webSync, "repo: APP,", "repo: "+url+", secretRef: {name: gitea},", 1))
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	e.receiver("gitea-hook", "gitea-s3cret")
	g.API(t, "POST", "repos/"+g.User+"/web/hooks", map[string]any{
		"type": "gitea", "active": true, "events": []string{"pull_request", "pull_request_sync"},
		"config": map[string]string{"url": "http://" + addrs.Hook + "/hook/" + e.ns + "/gitea-hook", "content_type": "json", "secret": "gitea-s3cret"},
	}, nil)

	comments := func(number int) []string {
		var cs []struct {
			Body string `json:"body"`
		}
		g.API(t, "GET", fmt.Sprintf("repos/%s/web/issues/%d/comments", g.User, number), nil, &cs)
		var out []string
		for _, c := range cs {
			out = append(out, c.Body)
		}
		return out
	}
	status := func(sha string) string {
		var combined struct {
			Statuses []struct{ Context, Status, Description string } `json:"statuses"`
		}
		g.API(t, "GET", fmt.Sprintf("repos/%s/web/commits/%s/status", g.User, sha), nil, &combined)
		for _, s := range combined.Statuses {
			if s.Context == "sluice/preview" {
				return s.Status + ": " + s.Description
			}
		}
		return "none"
	}
	until := func(number int, sha, wantStatus, wantInComment string) {
		t.Helper()
		e.eventually(60*time.Second, func() string {
			if got := status(sha); got != wantStatus {
				return fmt.Sprintf("the status of %s is %q, want %q", sha[:7], got, wantStatus)
			}
			cs := comments(number)
			if len(cs) != 1 || !strings.Contains(cs[0], wantInComment) {
				return fmt.Sprintf("the comments of #%d are %q: one, with %q, is wanted", number, cs, wantInComment)
			}
			return ""
		})
	}

	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "change")
	cm := func(v string) map[string]string {
		return map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: '" + v + "'}\n"}
	}
	head1 := w.Write(cm("1")).Commit("a ConfigMap")
	w.Push("change")
	var pr struct{ Number int }
	pr.Number = g.OpenPullRequest(t, g.User, g.Password, "web", "change", "main", "a ConfigMap")
	until(pr.Number, head1, "success: 1 folder changes", "| ✏️ | web | `apps/web` | 1 | 0 | 0 | 0 |")
	// The status links to the dashboard's page of the pull request, at
	// its head (a comment cut at the forge's limit says it too).
	page := fmt.Sprintf("https://sluice.example.com/pulls/%s?repo=%s&base=main&number=%d&head=refs%%2Fpull%%2F%d%%2Fhead&commit=%s",
		e.ns, neturl.QueryEscape(url), pr.Number, pr.Number, head1)
	var combined struct {
		Statuses []struct {
			Context   string
			TargetURL string `json:"target_url"`
		} `json:"statuses"`
	}
	g.API(t, "GET", fmt.Sprintf("repos/%s/web/commits/%s/status", g.User, head1), nil, &combined)
	if len(combined.Statuses) != 1 || combined.Statuses[0].TargetURL != page {
		t.Errorf("the status links to %+v, want %s", combined.Statuses, page)
	}

	head2 := w.Write(cm("2")).Commit("v is 2")
	w.Push("change")
	until(pr.Number, head2, "success: 1 folder changes", "+data: {v: '2'}")

	head3 := w.Write(map[string]string{"deploy/web/kustomization.yaml": "resources: [deployment.yaml, cm.yaml, gone.yaml]\n"}).Commit("broken")
	w.Push("change")
	until(pr.Number, head3, "failure: 1 render fails", "gone.yaml")

	// A fork's pull request reading the controller's files.
	g.CreateUser(t, "mallory", "Mallory-test-1")
	f := testenv.NewWork(t, g.Fork(t, "mallory", "Mallory-test-1", "web"))
	testenv.Git(t, f.Dir, "fetch", "-q", "origin", "main")
	testenv.Git(t, f.Dir, "checkout", "-q", "-b", "steal", "FETCH_HEAD")
	forkHead := f.Write(map[string]string{"deploy/web/kustomization.yaml": "resources: [deployment.yaml]\nconfigMapGenerator:\n- name: stolen\n  files: [/etc/passwd]\n"}).Commit("innocent")
	f.Push("steal")
	var fpr struct{ Number int }
	fpr.Number = g.OpenPullRequest(t, "mallory", "Mallory-test-1", "web", "mallory:steal", "main", "innocent")
	until(fpr.Number, forkHead, "failure: 1 render fails", "/etc/passwd")
	if cs := comments(fpr.Number); strings.Contains(cs[0], "root:") {
		t.Errorf("the fork's comment shows the file:\n%s", cs[0])
	}

	// Closed: answered, ignored.
	g.API(t, "PATCH", fmt.Sprintf("repos/%s/web/pulls/%d", g.User, pr.Number), map[string]any{"state": "closed"}, nil)
	e.eventually(30*time.Second, func() string {
		if !strings.Contains(e.logs.tail(100000), "ignored=\"pull request action closed\"") {
			return "the closing was not answered as ignored"
		}
		return ""
	})
	if strings.Contains(e.logs.tail(1000000), "root:") {
		t.Error("the controller's log shows /etc/passwd")
	}
}
