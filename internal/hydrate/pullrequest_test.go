package hydrate

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

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
	ctx := context.Background()
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
		rep, err := Run(ctx, syncs, Options{Cache: cache, Registry: registry.New()})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.Err(); err != nil {
			t.Fatal(err)
		}
		return rep.Results
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

	// A new change opens a new pull request; going back closes it.
	app.Write(cm("web", "2")).Commit("web 2")
	res = run("web", "api")
	second := res[0].PullRequest
	if second == nil || second.Number == p.Number || second.State != v1alpha1.PullRequestOpen {
		t.Fatalf("a change after the merge: %+v", second)
	}
	app.Write(cm("web", "1")).Commit("web back to 1")
	res = run("web", "api")
	if res[0].PullRequest == nil || res[0].PullRequest.Number != second.Number || res[0].PullRequest.State != v1alpha1.PullRequestClosed {
		t.Errorf("after going back: %+v", res[0].PullRequest)
	}
	for _, x := range pulls() {
		if x.Number == second.Number && x.State != "closed" {
			t.Errorf("#%d is %s on Gitea", x.Number, x.State)
		}
	}
}
