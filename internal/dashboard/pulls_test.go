package dashboard

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// A source pull request's page is the whole preview the comment is cut
// from: the head, as the forge keeps it (refs/pull/N/head), merged onto
// the base, for the namespace's syncs that follow the base; the folders
// it does not reach are not rendered; the page reads only repositories a
// sync of the namespace reads, and only the pull request's own ref.
func TestAPullRequestsPage(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("pulls")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	gs := testenv.NewGitServer(t)
	appURL, dstURL := gs.CreateRepo(t, "app"), gs.CreateRepo(t, "deploy")
	app := testenv.NewWork(t, appURL)
	cm := func(name, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {level: '" + v + "'}\n"
	}
	app.Write(map[string]string{"deploy/web/cm.yaml": cm("web", "1"), "deploy/api/cm.yaml": cm("api", "1")}).Commit("web and api")
	app.Push()
	var confs []config.ManifestSync
	for _, name := range []string{"web", "api"} {
		ms := &v1alpha1.ManifestSync{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.ManifestSyncSpec{
				Source:      v1alpha1.Source{Repo: appURL, Ref: "main", Path: "deploy/" + name},
				Destination: v1alpha1.Destination{Repo: dstURL, Branch: "env/dev", Path: "apps/" + name},
			},
		}
		if err := c.Create(ctx, ms); err != nil {
			t.Fatal(err)
		}
		conf, err := config.FromManifestSync(ms, false)
		if err != nil {
			t.Fatal(err)
		}
		confs = append(confs, conf)
	}
	if rep, err := hydrate.Run(ctx, confs, hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}); err != nil || rep.Err() != nil {
		t.Fatalf("hydrate: %v %v", err, rep.Err())
	}
	// Pull request 7: web's level 2, kept where GitHub and Gitea keep a
	// pull request's head.
	app.Write(map[string]string{"deploy/web/cm.yaml": cm("web", "2")}).Commit("web: level 2")
	head := app.Head()
	app.Push("HEAD:refs/pull/7/head")

	base := serve(t, cp.Config, Options{Namespace: ns, Preview: &preview.Previewer{Hydrate: hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}}})
	b := browser(t)
	page := base + PullPath(ns, appURL, "main", "", head, 7)
	do(t, b, chromedp.Navigate(page), chromedp.WaitVisible(`.pull-result`))
	text := run(t, b, chromedp.Text(`#pull`))
	if !strings.Contains(text, "1 folder changes") {
		t.Errorf("the summary of pull request 7:\n%s", text)
	}
	diff := run(t, b, chromedp.Text(`pre.diff`))
	if !strings.Contains(diff, "-data: {level: '1'}") || !strings.Contains(diff, "+data: {level: '2'}") {
		t.Errorf("the diff lacks web's level:\n%s", diff)
	}
	if rows := run(t, b, chromedp.Evaluate[[]string](`[...document.querySelectorAll("tbody tr td:first-child")].map(td => td.textContent)`)); len(rows) != 1 || rows[0] != "web" {
		t.Errorf("the folders reached: %q, want only web's", rows)
	}
	screenshot(t, b, "pull")
	// A head that has moved on is previewed at the commit the link names.
	app.Write(map[string]string{"deploy/web/cm.yaml": cm("web", "3")}).Commit("web: level 3")
	app.Push("+HEAD:refs/pull/7/head")
	do(t, b, chromedp.Navigate(page), chromedp.WaitVisible(`.pull-result`))
	if diff := run(t, b, chromedp.Text(`pre.diff`)); !strings.Contains(diff, "+data: {level: '2'}") {
		t.Errorf("at the commit of the link, the diff:\n%s", diff)
	}

	// What the page refuses to read.
	for _, tc := range []struct{ query, want string }{
		{"repo=" + url.QueryEscape("https://elsewhere.example.com/x.git") + "&base=main&number=7", "No ManifestSync of " + ns + " reads"},
		{"repo=" + url.QueryEscape(appURL) + "&base=main&number=7&head=" + url.QueryEscape("refs/heads/main"), "neither pull request 7's ref nor a branch"},
		{"repo=" + url.QueryEscape(appURL) + "&base=main&number=7&head=" + url.QueryEscape("refs/pull/8/head"), "neither pull request 7's ref nor a branch"},
		{"repo=" + url.QueryEscape(appURL) + "&base=" + url.QueryEscape("main..x") + "&number=7", "not a branch name"},
		{"repo=" + url.QueryEscape(appURL) + "&base=main&number=-1", "not a pull request's number"},
		{"repo=" + url.QueryEscape(appURL) + "&base=main&number=7&commit=HEAD", "not a full commit SHA"},
		{"repo=" + url.QueryEscape("/etc") + "&base=main&number=7", "not a remote repository"},
	} {
		resp, err := http.Get(base + "/pulls/" + ns + "?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		body := html.UnescapeString(string(raw))
		resp.Body.Close()
		if !strings.Contains(body, tc.want) || resp.StatusCode == http.StatusOK {
			t.Errorf("%s: %d, the page does not say %q:\n%s", tc.query, resp.StatusCode, tc.want, body)
		}
	}
}
