package dashboard

import (
	"context"
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

// A sync's "what will change" is the real dry run of its next hydration:
// nothing after a hydration, the changed lines after a source commit; its
// history shows the destination commits that touched the folder, and its
// provenance what was read.
func TestWhatWillChangeAndHistory(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("plan")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	gs := testenv.NewGitServer(t)
	appURL, dstURL := gs.CreateRepo(t, "app"), gs.CreateRepo(t, "deploy")
	app := testenv.NewWork(t, appURL)
	cm := func(v string) map[string]string {
		return map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {level: '" + v + "'}\n"}
	}
	app.Write(cm("1")).Commit("web: level 1")
	app.Push()

	ms := &v1alpha1.ManifestSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.ManifestSyncSpec{
			Source:      v1alpha1.Source{Repo: appURL, Ref: "main", Path: "deploy/web"},
			Destination: v1alpha1.Destination{Repo: dstURL, Branch: "env/dev", Path: "apps/web"},
		},
	}
	if err := c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	// The first hydration, as the controller would run it.
	hydrateNow := func() hydrate.Result {
		t.Helper()
		conf, err := config.FromManifestSync(ms, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := hydrate.Run(ctx, []config.ManifestSync{conf}, hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()})
		if err != nil || rep.Err() != nil {
			t.Fatalf("hydrate: %v %v", err, rep.Err())
		}
		return rep.Results[0]
	}
	first := hydrateNow()
	if first.Result != hydrate.Committed {
		t.Fatalf("first hydration: %+v", first)
	}

	base := serve(t, cp.Config, Options{Namespace: ns, Preview: &preview.Previewer{Hydrate: hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}}})
	b := browser(t)

	do(t, b, chromedp.Navigate(base+"/syncs/"+ns+"/web"), chromedp.WaitVisible(`svg.graph`),
		chromedp.Click(`nav.actions a[href$="/changes"]`, chromedp.NodeVisible), chromedp.WaitVisible(`.plan-result`))
	if got := run(t, b, chromedp.Text(`.plan-result`)); !strings.Contains(got, "Nothing will change") {
		t.Errorf("right after a hydration, what will change says %q", got)
	}

	// A source commit: the next hydration would change the level.
	app.Write(cm("2")).Commit("web: level 2")
	app.Push()
	do(t, b, chromedp.Reload(), chromedp.WaitVisible(`.plan-result`))
	text := run(t, b, chromedp.Text(`#changes`))
	if !strings.Contains(text, "The next hydration changes") {
		t.Errorf("after a source commit, what will change says:\n%s", text)
	}
	diff := run(t, b, chromedp.Text(`pre.diff`))
	if !strings.Contains(diff, "-data: {level: '1'}") || !strings.Contains(diff, "+data: {level: '2'}") {
		t.Errorf("the diff lacks the level's change:\n%s", diff)
	}
	if n := run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("pre.diff span.add").length`)); n == 0 {
		t.Error("no added line is marked in the diff")
	}
	screenshot(t, b, "changes")

	// Nothing was written: the destination still has the first commit.
	conf, _ := config.FromManifestSync(ms, false)
	if rep, err := hydrate.Run(ctx, []config.ManifestSync{conf}, hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New(), DryRun: true}); err != nil || !strings.Contains(rep.Results[0].Diff, "level") {
		t.Fatalf("the preview wrote something: %+v %v", rep, err)
	}

	// History: after a second hydration, two commits changed the folder.
	second := hydrateNow()
	do(t, b, chromedp.Navigate(base+"/syncs/"+ns+"/web/history"), chromedp.WaitVisible(`ol.history`))
	items := run(t, b, chromedp.Evaluate[[]string](`[...document.querySelectorAll("ol.history li")].map(li => li.dataset.commit)`))
	if len(items) != 2 || items[0] != second.Commit || items[1] != first.Commit {
		t.Errorf("history lists %v, want [%s %s]", items, second.Commit, first.Commit)
	}
	do(t, b, chromedp.Click(`details summary`, chromedp.NodeVisible))
	text = run(t, b, chromedp.Text(`main`))
	screenshot(t, b, "history")
	for _, want := range []string{"Fingerprint", "deploy/web/cm.yaml", app.Head()[:12]} {
		if !strings.Contains(text, want) {
			t.Errorf("the history page lacks %q:\n%s", want, text)
		}
	}
	if n := run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("svg.timeline circle").length`)); n != 2 {
		t.Errorf("the timeline has %d commits, want 2", n)
	}

	// A second sync writes the same branch: the branch's timeline has a
	// lane per folder, each commit's dots on the folders it changed.
	api := ms.DeepCopy()
	api.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "api"}
	api.Spec.Destination.Path = "apps/api"
	if err := c.Create(ctx, api); err != nil {
		t.Fatal(err)
	}
	apiConf, _ := config.FromManifestSync(api, false)
	rep, err := hydrate.Run(ctx, []config.ManifestSync{apiConf}, hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()})
	if err != nil || rep.Err() != nil {
		t.Fatalf("hydrate api: %v %v", err, rep.Err())
	}
	do(t, b, chromedp.Navigate(base+"/branches"), chromedp.WaitVisible(`tr[data-branch="env/dev"]`),
		chromedp.Click(`tr[data-branch="env/dev"] a`, chromedp.NodeVisible), chromedp.WaitVisible(`svg.lanes`))
	dots := run(t, b, chromedp.Evaluate[map[string]int](`Object.fromEntries([...document.querySelectorAll("svg.lanes g[data-commit]")].map(g => [g.dataset.commit, g.querySelectorAll("circle").length]))`))
	wantDots := map[string]int{first.Commit: 1, second.Commit: 1, rep.Results[0].Commit: 1}
	if len(dots) != 3 || dots[first.Commit] != 1 || dots[rep.Results[0].Commit] != 1 {
		t.Errorf("the branch's lanes: %v, want %v", dots, wantDots)
	}
	if text := run(t, b, chromedp.Text(`ol.history`)); !strings.Contains(text, "apps/api") || !strings.Contains(text, "apps/web") {
		t.Errorf("the branch's commits do not name their folders:\n%s", text)
	}
	screenshot(t, b, "branch")
}

// A preview reads the Secrets a sync names as the person asking: one who
// may not read them gets the API server's refusal, not the repository.
func TestWhatWillChangeReadsSecretsAsThePerson(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("creds")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	gs := testenv.NewGitServer(t, testenv.WithBasicAuth("deployer", "s3cret"))
	appURL, dstURL := gs.CreateRepo(t, "app"), gs.CreateRepo(t, "deploy")
	app := testenv.NewWork(t, strings.Replace(appURL, "http://", "http://deployer:s3cret@", 1))
	app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {level: '1'}\n"}).Commit("web")
	app.Push()
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git"}, StringData: map[string]string{"username": "deployer", "password": "s3cret"}}); err != nil {
		t.Fatal(err)
	}
	ms := &v1alpha1.ManifestSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.ManifestSyncSpec{
			Source:      v1alpha1.Source{Repo: appURL, Ref: "main", Path: "deploy/web", SecretRef: &v1alpha1.SecretRef{Name: "git"}},
			Destination: v1alpha1.Destination{Repo: dstURL, Branch: "env/dev", Path: "apps/web", SecretRef: &v1alpha1.SecretRef{Name: "git"}},
		},
	}
	if err := c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	pv := func() *preview.Previewer {
		return &preview.Previewer{Hydrate: hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}}
	}
	admin := serve(t, cp.Config, Options{Namespace: ns, Preview: pv()})
	asViewer := serve(t, viewer(t, c), Options{Namespace: ns, Preview: pv()})
	b := browser(t)

	do(t, b, chromedp.Navigate(admin+"/syncs/"+ns+"/web/changes"), chromedp.WaitVisible(`#changes`))
	if text := run(t, b, chromedp.Text(`#changes`)); !strings.Contains(text, "The next hydration changes") || !strings.Contains(text, "+data: {level: '1'}") {
		t.Errorf("with the Secret, what will change says:\n%s", text)
	}
	do(t, b, chromedp.Navigate(asViewer+"/syncs/"+ns+"/web/changes"), chromedp.WaitVisible(`#changes`))
	text := run(t, b, chromedp.Text(`#changes`))
	if !strings.Contains(text, "Secret "+ns+"/git") || !strings.Contains(text, "forbidden") || strings.Contains(text, "level") {
		t.Errorf("without the right to read the Secret, what will change says:\n%s", text)
	}
	if strings.Contains(text, "s3cret") {
		t.Error("the page shows the password")
	}
}
