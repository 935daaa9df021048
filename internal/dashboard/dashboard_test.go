package dashboard

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { testenv.RunWithControlPlane(m, &cp) }

func kube(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	clientgoscheme.AddToScheme(s)
	v1alpha1.AddToScheme(s)
	c, err := client.New(cp.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// syncWith creates a ManifestSync and gives it a status, as the controller
// would.
func syncWith(t *testing.T, c client.Client, ns, name string, status v1alpha1.ManifestSyncStatus, labels map[string]string) {
	t.Helper()
	ms := &v1alpha1.ManifestSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1alpha1.ManifestSyncSpec{
			Source:      v1alpha1.Source{Repo: "https://git.example.com/team/" + name + ".git", Path: "deploy/prod"},
			Destination: v1alpha1.Destination{Repo: "https://git.example.com/team/deploy.git", Branch: "env/prod", Path: "apps/" + name},
		},
	}
	if err := c.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	ms.Status = status
	if err := c.Status().Update(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

func ready(commit string) v1alpha1.ManifestSyncStatus {
	now := metav1.Now()
	return v1alpha1.ManifestSyncStatus{
		ReconcileStatus: v1alpha1.ReconcileStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded, Message: "committed " + commit[:12], LastTransitionTime: now},
		}},
		Source:      &v1alpha1.ProvenanceSource{Repo: "https://git.example.com/team/web.git", Commit: commit, Path: "deploy/prod"},
		Destination: &v1alpha1.DestinationStatus{Repo: "https://git.example.com/team/deploy.git", Branch: "env/prod", Path: "apps/web", Commit: strings.Repeat("d", 40)},
		Images:      []v1alpha1.PinnedImage{{Name: "web", From: "registry.example.com/web", Tag: "1.4.2", Digest: "sha256:" + strings.Repeat("ab", 32)}},
	}
}

// browser starts a headless Chromium (Debian's chromium package).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: install Debian's chromium package (apt-get install chromium; .ci/run does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

// screenshot writes the page as PNG under the test's artifacts, for a
// person to look at.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	p := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func TestSyncsPageListsFiltersPagesAndUpdatesLive(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("dash")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range 55 {
		syncWith(t, c, ns, fmt.Sprintf("app-%02d", i), ready(fmt.Sprintf("%040x", i+1)), map[string]string{"team": []string{"web", "data"}[i%2]})
	}
	failed := ready(strings.Repeat("f", 40))
	failed.Conditions[0].Status, failed.Conditions[0].Reason, failed.Conditions[0].Message = metav1.ConditionFalse, v1alpha1.ReasonFailed, "render failed"
	failed.LastError = "deploy/prod/kustomization.yaml: resource web.yaml: no such file"
	syncWith(t, c, ns, "broken", failed, nil)
	locked := ready(strings.Repeat("e", 40))
	locked.Conditions[0].Status, locked.Conditions[0].Reason, locked.Conditions[0].Message = metav1.ConditionFalse, v1alpha1.ReasonLocked, "held by alice@laptop until 2026-12-03T18:00:00Z"
	locked.Lock = &v1alpha1.Takeover{Owner: "alice@laptop", Commit: strings.Repeat("c", 40), Tag: "takeover-alice", Expires: "2026-12-03T18:00:00Z"}
	locked.Source.SignedBy = "release@example.com (SSH SHA256:abc)"
	locked.Images[0].Verified = "cosign keyless, https://github.com/team/web/.github/workflows/release.yml@refs/heads/main (issuer https://token.actions.githubusercontent.com)"
	syncWith(t, c, ns, "held", locked, nil)
	review := ready(strings.Repeat("b", 40))
	review.Conditions[0].Status, review.Conditions[0].Reason, review.Conditions[0].Message = metav1.ConditionFalse, v1alpha1.ReasonPullRequestOpen, "proposed in pull request #7, waiting for review"
	review.PullRequest = &v1alpha1.PullRequestStatus{URL: "https://gitea.example.com/team/deploy/pulls/7", Number: 7, State: "open", Branch: "sluice/pr/env/prod"}
	syncWith(t, c, ns, "proposed", review, nil)

	sctx, stop := context.WithCancel(ctx)
	defer stop()
	srv, err := New(sctx, cp.Config, Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	addr, _, err := srv.Listen(sctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	b := browser(t)

	// The table: the first page of 57 syncs, sorted, each row linking its
	// sync, states as words and symbols (colour is not the only signal).
	do(t, b, chromedp.Navigate(base+"/syncs"), chromedp.WaitVisible(`table.syncs tbody tr`))
	summary := run(t, b, chromedp.Text(`.summary`))
	rows := run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("table.syncs tbody tr").length`))
	if !strings.Contains(summary, "58 of 58 syncs, showing 1–50") || !strings.Contains(summary, "55 Ready") || !strings.Contains(summary, "1 Failed") || !strings.Contains(summary, "1 Locked") || !strings.Contains(summary, "1 InReview") {
		t.Errorf("summary: %q", summary)
	}
	if rows != 50 {
		t.Errorf("%d rows on the first page, want 50", rows)
	}
	screenshot(t, b, "syncs")

	// The next page has the rest.
	do(t, b, chromedp.Click(`a[rel="next"]`, chromedp.NodeVisible), chromedp.WaitVisible(`a[rel="prev"]`))
	rows = run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("table.syncs tbody tr").length`))
	if rows != 8 {
		t.Errorf("%d rows on the second page, want 8", rows)
	}
	if text := run(t, b, chromedp.Text(`tr[data-sync="`+ns+`/proposed"]`)); !strings.Contains(text, "InReview") || !strings.Contains(text, "pull request #7 open") {
		t.Errorf("a sync waiting for review: %q", text)
	}

	// Filtering on the server: state, then labels.
	do(t, b,
		chromedp.Navigate(base+"/syncs"),
		chromedp.WaitVisible(`select[name="state"]`),
		chromedp.SetValue(`select[name="state"]`, "Failed"),
		chromedp.Submit(`form.filters`),
		chromedp.WaitVisible(`tr[data-sync="`+ns+`/broken"]`),
	)
	text := run(t, b, chromedp.Text(`table.syncs tbody`))
	rows = run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("table.syncs tbody tr").length`))
	if rows != 1 || !strings.Contains(text, "no such file") {
		t.Errorf("state=Failed shows %d rows:\n%s", rows, text)
	}
	do(t, b, chromedp.Navigate(base+"/syncs?label=team%3Ddata"), chromedp.WaitVisible(`table.syncs`))
	rows = run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("table.syncs tbody tr").length`))
	if rows != 27 {
		t.Errorf("team=data shows %d rows, want 27", rows)
	}

	// Live: a sync created meanwhile appears without a reload.
	do(t, b, chromedp.Navigate(base+"/syncs?q=new"), chromedp.WaitVisible(`table.syncs`))
	run(t, b, chromedp.Evaluate[bool](`window.sameDocument = true`))
	waitText(t, b, "#live-status", "live")
	syncWith(t, c, ns, "new-one", ready(strings.Repeat("a", 40)), nil)
	do(t, b, chromedp.WaitVisible(`tr[data-sync="`+ns+`/new-one"]`))
	if same := run(t, b, chromedp.Evaluate[bool](`window.sameDocument === true`)); !same {
		t.Error("the page was reloaded instead of updated in place")
	}

	// A sync's page: the chain from source to digests, and the lock.
	do(t, b, chromedp.Navigate(base+"/syncs/"+ns+"/held"), chromedp.WaitVisible(`.chain`))
	text = run(t, b, chromedp.Text(`main`))
	for _, want := range []string{"Locked", "Held by alice@laptop until", "takeover-alice", "env/prod · apps/web", "web: registry.example.com/web:1.4.2 → sha256:abab",
		"verified: signed by release@example.com (SSH SHA256:abc)",
		"verified: cosign keyless, https://github.com/team/web/.github/workflows/release.yml@refs/heads/main (issuer https://token.actions.githubusercontent.com)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the sync's page lacks %q:\n%s", want, text)
		}
	}
	screenshot(t, b, "sync")

	// Light and dark, as the system asks.
	background := func() string {
		return run(t, b, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
	}
	if bg := background(); bg != "rgb(255, 255, 255)" {
		t.Errorf("the light page's background is %s", bg)
	}
	do(t, b, prefersColorScheme("dark"))
	if bg := background(); bg != "rgb(13, 17, 23)" {
		t.Errorf("the dark page's background is %s", bg)
	}
	screenshot(t, b, "sync-dark")
	do(t, b, prefersColorScheme("light"))

	// Keyboard: the first Tab reaches the skip link.
	do(t, b, chromedp.KeyEvent("\t"))
	if focused := run(t, b, chromedp.Evaluate[string](`document.activeElement.textContent`)); focused != "Skip to content" {
		t.Errorf("the first Tab focuses %q", focused)
	}
}

// prefersColorScheme makes the page's prefers-color-scheme what a system
// in that mode says.
func prefersColorScheme(mode string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: mode}}})
		return err
	})
}

func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := run(t, ctx, chromedp.Text(sel))
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s says %q, want %q", sel, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
