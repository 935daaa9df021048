package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// A takeover's lock, as a developer's `sluice takeover` leaves it in the
// destination: listed with its owner, tree and tag; extended and released
// from the page (commits in the destination), refused to a viewer.
func TestTakeoversPageExtendsAndReleasesLocks(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("locks")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	gs := testenv.NewGitServer(t)
	appURL, dstURL := gs.CreateRepo(t, "app"), gs.CreateRepo(t, "deploy")
	app := testenv.NewWork(t, appURL)
	app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {level: '1'}\n"}).Commit("web")
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
	// alice takes the folder over for an hour, as sluice takeover does.
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	lock := &v1alpha1.Takeover{Owner: "alice@laptop", Commit: app.Head(), Tag: "dev-alice", Expires: expires.Format(time.RFC3339)}
	conf, err := config.FromManifestSync(ms, false)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := hydrate.Run(ctx, []config.ManifestSync{conf}, hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New(), Takeover: lock})
	if err != nil || rep.Err() != nil {
		t.Fatalf("takeover: %v %v", err, rep.Err())
	}
	// The controller's status of a locked sync.
	ms.Status = v1alpha1.ManifestSyncStatus{Lock: lock, ReconcileStatus: v1alpha1.ReconcileStatus{Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonLocked, Message: "held by alice@laptop", LastTransitionTime: metav1.Now()}}},
		Destination: &v1alpha1.DestinationStatus{Repo: dstURL, Branch: "env/dev", Path: "apps/web", Commit: rep.Results[0].Commit}}
	if err := c.Status().Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	provenance := func() string {
		return testenv.Show(t, gs.Root+"/deploy.git", "env/dev", "apps/web/"+v1alpha1.ProvenanceFile)
	}
	pv := func() *preview.Previewer {
		return &preview.Previewer{Hydrate: hydrate.Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}}
	}
	admin := serve(t, cp.Config, Options{Namespace: ns, Preview: pv()})
	asViewer := serve(t, viewer(t, c), Options{Namespace: ns, Preview: pv()})
	b := browser(t)

	row := `tr[data-lock="` + ns + `/web"]`
	do(t, b, chromedp.Navigate(admin+"/takeovers"), chromedp.WaitVisible(row))
	text := strings.Join(strings.Fields(run(t, b, chromedp.Text(row))), " ")
	for _, want := range []string{"alice@laptop", "dev-alice", app.Head()[:12], lock.Expires, "env/dev · apps/web"} {
		if !strings.Contains(text, want) {
			t.Errorf("the lock's row lacks %q: %q", want, text)
		}
	}
	screenshot(t, b, "takeovers")

	// Extended by two hours: a commit that moves the expiry, nothing else.
	before := provenance()
	do(t, b, chromedp.SetValue(row+` select[name="hours"]`, "2"), chromedp.Click(row+` button[aria-label^="Extend"]`), chromedp.WaitVisible(`.flash`))
	want := expires.Add(2 * time.Hour).Format(time.RFC3339)
	if flash := run(t, b, chromedp.Text(`.flash`)); !strings.Contains(flash, "extended alice@laptop's lock on "+ns+"/web until "+want) {
		t.Errorf("extend says %q, want until %s", flash, want)
	}
	after := provenance()
	if !strings.Contains(after, "expires: \""+want+"\"") && !strings.Contains(after, "expires: "+want) {
		t.Errorf("the destination's lock after extend:\n%s", after)
	}
	if strings.Replace(after, want, lock.Expires, 1) != before {
		t.Errorf("extend changed more than the expiry:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var got v1alpha1.ManifestSync
	if err := c.Get(ctx, client.ObjectKeyFromObject(ms), &got); err != nil || got.Annotations[v1alpha1.ReconcileRequestAnnotation] == "" {
		t.Errorf("the sync was not asked to reconcile: %v %v", got.Annotations, err)
	}

	// A viewer may not release it.
	do(t, b, chromedp.Navigate(asViewer+"/takeovers"), chromedp.WaitVisible(row),
		chromedp.Click(row+` button[aria-label^="Release"]`), chromedp.WaitVisible(`.flash`))
	if flash := run(t, b, chromedp.Text(`.flash`)); !strings.Contains(flash, "refused") || !strings.Contains(flash, "may not patch manifestsyncs") {
		t.Errorf("the viewer's release says %q", flash)
	}
	if !strings.Contains(provenance(), "alice@laptop") {
		t.Fatal("the viewer's release went through")
	}

	// Released: the folder is hydrated back from the regular configuration.
	do(t, b, chromedp.Navigate(admin+"/takeovers"), chromedp.WaitVisible(row),
		chromedp.Click(row+` button[aria-label^="Release"]`), chromedp.WaitVisible(`.flash`))
	if flash := run(t, b, chromedp.Text(`.flash`)); !strings.Contains(flash, "released alice@laptop's lock on "+ns+"/web: committed") {
		t.Errorf("release says %q", flash)
	}
	if p := provenance(); strings.Contains(p, "takeover:") {
		t.Errorf("the folder is still locked after release:\n%s", p)
	}
	screenshot(t, b, "takeovers-released")
}
