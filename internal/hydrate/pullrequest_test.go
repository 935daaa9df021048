package hydrate

import (
	"context"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// pullRequest mode against a real Gitea: the syncs of one branch open one
// pull request; a later change updates it; a moved base rebases it; a
// merge makes the syncs unchanged at the merge commit; a change that goes
// back to what the base holds closes its pull request. The base branch is
// only ever written by the merge.
func TestPullRequestsOnGitea(t *testing.T) {
	g := testenv.StartGitea(t)
	dstURL := g.CreateRepo(t, "deploy")
	dst := testenv.NewWork(t, g.PushURL(dstURL))
	dst.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	dst.Push("main")
	app := testenv.NewWork(t, "")
	cm := func(name, level string) map[string]string {
		return map[string]string{"deploy/" + name + "/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {level: '" + level + "'}\n"}
	}
	app.Write(cm("web", "1")).Write(cm("api", "1")).Commit("apps")

	sync := func(name string) config.ManifestSync {
		obj := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ManifestSyncSpec{
			Source: v1alpha1.Source{Repo: app.Dir, Path: "deploy/" + name},
			Destination: v1alpha1.Destination{Repo: dstURL, Branch: "main", Path: "apps/" + name, Mode: v1alpha1.ModePullRequest,
				PullRequest: &v1alpha1.PullRequest{Forge: v1alpha1.ForgeGitea, Labels: []string{"sluice", "env/main"}}},
		}}
		ms, err := config.FromManifestSync(obj, true)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	u, _ := url.Parse(dstURL)
	run := func(names ...string) []Result {
		t.Helper()
		var syncs []config.ManifestSync
		for _, n := range names {
			syncs = append(syncs, sync(n))
		}
		cache := source.NewCache(t.TempDir(), source.WithAuth(source.Auth{Username: g.User, Password: g.Password, Hosts: []string{u.Host}}))
		return runOnGitea(t, syncs, cache)
	}
	type pr struct {
		Number int    `json:"number"`
		State  string `json:"state"`
		Title  string `json:"title"`
		Body   string `json:"body"`
		Merged bool   `json:"merged"`
		Head   struct {
			Ref string `json:"ref"`
			Sha string `json:"sha"`
		} `json:"head"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
	}
	pulls := func() []pr {
		var out []pr
		g.API(t, http.MethodGet, "repos/"+g.User+"/deploy/pulls?state=all", nil, &out)
		return out
	}
	mainTip := func() string { return g.Head(t, dstURL, "main") }
	parentOf := func(sha string) string {
		testenv.Git(t, dst.Dir, "fetch", "-q", "origin", "sluice/pr/main")
		return testenv.Git(t, dst.Dir, "rev-parse", sha+"^")
	}
	initial := mainTip()

	// Opened.
	res := run("web")
	p := res[0].PullRequest
	if res[0].Result != Committed || p == nil || p.State != v1alpha1.PullRequestOpen || p.Branch != "sluice/pr/main" || !strings.Contains(p.URL, "/pulls/") {
		t.Fatalf("the first run: %+v, pull request %+v", res[0], p)
	}
	prs := pulls()
	if len(prs) != 1 || prs[0].Number != p.Number || prs[0].State != "open" || !strings.Contains(prs[0].Title, "web") || len(prs[0].Labels) != 2 {
		t.Fatalf("on Gitea: %+v", prs)
	}
	if mainTip() != initial {
		t.Fatal("main was written")
	}
	// The same again: nothing new.
	if res = run("web"); res[0].Result != Unchanged || res[0].PullRequest.Number != p.Number {
		t.Errorf("an unchanged run: %+v", res[0])
	}

	// Another sync's change joins the same pull request.
	res = run("web", "api")
	prs = pulls()
	if len(prs) != 1 || !strings.Contains(prs[0].Body, "apps/api") || !strings.Contains(prs[0].Body, "apps/web") || res[1].Result != Committed || res[1].PullRequest.Number != p.Number {
		t.Fatalf("after api joined: %+v\n%+v", res, prs)
	}

	// The base moves: the proposal is rebuilt on it.
	dst.Write(map[string]string{"README.md": "# deploy, moved\n"}).Commit("readme")
	dst.Push("main")
	res = run("web", "api")
	if parent := parentOf(res[0].PullRequest.Commit); parent != mainTip() || len(pulls()) != 1 {
		t.Errorf("after main moved, the proposal's parent is %s, main is %s", parent, mainTip())
	}

	// Merged: the syncs stand at the merge commit, nothing left to propose.
	g.Merge(t, "deploy", p.Number)
	res = run("web", "api")
	for _, r := range res {
		if r.PullRequest == nil || r.PullRequest.State != v1alpha1.PullRequestMerged || r.PullRequest.MergeCommit != mainTip() || r.Commit != mainTip() {
			t.Errorf("after the merge: %+v %+v", r, r.PullRequest)
		}
	}
	if out := testenv.Git(t, "", "ls-remote", dstURL, "refs/heads/sluice/pr/main"); out != "" {
		t.Errorf("the proposal branch is left after the merge: %s", out)
	}

	// Someone edits api's folder on main by hand; then a change of web
	// alone opens a new pull request, which leaves api's folder as main
	// has it (the merged proposal is not carried again).
	dst.Write(map[string]string{"apps/api/by-hand.yaml": "x: 1\n"}).Commit("by hand")
	if err := func() error { testenv.Git(t, dst.Dir, "pull", "-q", "--rebase", "origin", "main"); return nil }(); err != nil {
		t.Fatal(err)
	}
	dst.Push("main")
	app.Write(cm("web", "2")).Commit("web 2")
	res = run("web")
	second := res[0].PullRequest
	if second == nil || second.Number == p.Number || second.State != v1alpha1.PullRequestOpen {
		t.Fatalf("a change after the merge: %+v", second)
	}
	testenv.Git(t, dst.Dir, "fetch", "-q", "origin", "sluice/pr/main")
	if diff := testenv.Git(t, dst.Dir, "diff", "--stat", "origin/main", "FETCH_HEAD", "--", "apps/api"); diff != "" {
		t.Errorf("the new proposal changes api's folder:\n%s", diff)
	}
	app.Write(cm("web", "1")).Commit("web back to 1")
	res = run("web")
	if res[0].PullRequest == nil || res[0].PullRequest.Number != second.Number || res[0].PullRequest.State != v1alpha1.PullRequestClosed {
		t.Errorf("after going back: %+v", res[0].PullRequest)
	}
	for _, x := range pulls() {
		if x.Number == second.Number && x.State != "closed" {
			t.Errorf("#%d is %s on Gitea", x.Number, x.State)
		}
	}
}

// What a pullRequest block asks of Gitea, with an access token: a draft (Gitea marks drafts by
// the title), reviewers asked, auto-merge scheduled (with no checks to
// wait for, Gitea merges at once), a title and body from templates.
func TestPullRequestSettingsOnGitea(t *testing.T) {
	g := testenv.StartGitea(t)
	g.API(t, http.MethodPost, "admin/users", map[string]any{"username": "reviewer", "email": "reviewer@example.com", "password": "Reviewer-pass-1", "must_change_password": false}, nil)
	u, _ := url.Parse(g.URL)
	// An access token made through Gitea's API, as a team would give one
	// (SLUICE_GIT_TOKEN, or a Secret's password): no user name.
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	g.API(t, http.MethodPost, "users/"+g.User+"/tokens", map[string]any{"name": "sluice", "scopes": []string{"write:repository", "write:issue"}}, &tok)
	app := testenv.NewWork(t, "")
	app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {level: '1'}\n"}).Commit("web")
	run := func(repo string, pr v1alpha1.PullRequest) Result {
		t.Helper()
		dstURL := g.CreateRepo(t, repo)
		g.API(t, http.MethodPut, "repos/"+g.User+"/"+repo+"/collaborators/reviewer", map[string]any{"permission": "write"}, nil)
		dst := testenv.NewWork(t, g.PushURL(dstURL))
		dst.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
		dst.Push("main")
		obj := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ManifestSyncSpec{
			Source:      v1alpha1.Source{Repo: app.Dir, Path: "deploy/web"},
			Destination: v1alpha1.Destination{Repo: dstURL, Branch: "main", Path: "apps/web", Mode: v1alpha1.ModePullRequest, PullRequest: &pr},
		}}
		ms, err := config.FromManifestSync(obj, true)
		if err != nil {
			t.Fatal(err)
		}
		cache := source.NewCache(t.TempDir(), source.WithAuth(source.Auth{Password: tok.SHA1, Hosts: []string{u.Host}}))
		return runOnGitea(t, []config.ManifestSync{ms}, cache)[0]
	}
	type pull struct {
		Title              string `json:"title"`
		Body               string `json:"body"`
		Merged             bool   `json:"merged"`
		RequestedReviewers []struct {
			Login string `json:"login"`
		} `json:"requested_reviewers"`
	}
	get := func(repo string, n int) pull {
		var p pull
		g.API(t, http.MethodGet, "repos/"+g.User+"/"+repo+"/pulls/"+strconv.Itoa(n), nil, &p)
		return p
	}

	res := run("drafted", v1alpha1.PullRequest{Draft: true, Reviewers: []string{"reviewer"}, Forge: v1alpha1.ForgeGitea,
		Title: "Deploy {{.Branch}}", Body: "{{range .Syncs}}{{.Name}} from {{.Source}}{{end}}\n{{.Stat}}"})
	p := get("drafted", res.PullRequest.Number)
	if p.Title != "WIP: Deploy main" || len(p.RequestedReviewers) != 1 || p.RequestedReviewers[0].Login != "reviewer" ||
		!strings.HasPrefix(p.Body, "web from "+app.Dir) || !strings.Contains(p.Body, "`apps/web`: 3 added, 0 changed, 0 removed") {
		t.Errorf("a draft with a reviewer and templates: %+v", p)
	}

	// A body template that would print a gigabyte, as a team that may set
	// templates could write one: it runs in a worker, bounded, and fails
	// the sync in seconds; this process never holds the gigabyte.
	dstURL := g.CreateRepo(t, "hostile")
	dst := testenv.NewWork(t, g.PushURL(dstURL))
	dst.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	dst.Push("main")
	obj := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ManifestSyncSpec{
		Source: v1alpha1.Source{Repo: app.Dir, Path: "deploy/web"},
		Destination: v1alpha1.Destination{Repo: dstURL, Branch: "main", Path: "apps/web", Mode: v1alpha1.ModePullRequest,
			PullRequest: &v1alpha1.PullRequest{Forge: v1alpha1.ForgeGitea, Body: `{{range 600}}{{printf "%0999999d" 1}}{{end}}`}},
	}}
	ms, err := config.FromManifestSync(obj, true)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	var rep *Report
	var start time.Time
	sb := testSandbox(t)
	for range 50 { // Gitea answers 404 for a new repository's pull requests for a moment
		runtime.ReadMemStats(&before)
		start = time.Now()
		rep, err = Run(context.Background(), []config.ManifestSync{ms}, Options{Sandbox: sb, Registry: registry.New(),
			Cache: source.NewCache(t.TempDir(), source.WithAuth(source.Auth{Password: tok.SHA1, Hosts: []string{u.Host}}))})
		runtime.ReadMemStats(&after)
		if err != nil || !strings.Contains(rep.Results[0].Error, "404 Not Found") {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || rep.Results[0].Result != Failed || !strings.Contains(rep.Results[0].Error, "pullRequest.body") || !strings.Contains(rep.Results[0].Error, "output over its limit") {
		t.Fatalf("a hostile body template: %v %+v", err, rep)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the hostile template took %s", d)
	}
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 256<<20 {
		t.Errorf("this process allocated %d MiB for the template", grew>>20)
	}

	res = run("automerged", v1alpha1.PullRequest{AutoMerge: true, Forge: v1alpha1.ForgeGitea})
	deadline := time.Now().Add(30 * time.Second)
	for !get("automerged", res.PullRequest.Number).Merged {
		if time.Now().After(deadline) {
			t.Fatal("auto-merge did not merge the pull request")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runOnGitea hydrates syncs; Gitea answers 404 for a repository's pull
// requests for a moment after its first push, so a failed run is tried
// again, for a few seconds.
func runOnGitea(t *testing.T, syncs []config.ManifestSync, cache *source.Cache) []Result {
	t.Helper()
	var err error
	for range 50 {
		var rep *Report
		if rep, err = Run(context.Background(), syncs, Options{Cache: cache, Registry: registry.New()}); err == nil {
			if err = rep.Err(); err == nil {
				return rep.Results
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}
