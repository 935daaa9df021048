package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/session"
	"sluice.dev/sluice/internal/testenv"
)

// serve starts a dashboard as cfg's identity and returns its base URL.
func serve(t *testing.T, cfg *rest.Config, o Options) string {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	srv, err := New(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	addr, _, err := srv.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// viewer is a user who may read syncs and sessions, and change nothing.
func viewer(t *testing.T, c client.Client) *rest.Config {
	t.Helper()
	ctx := context.Background()
	name := testenv.Namespace("viewer")
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"manifestsyncs", "images"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: session.SystemNamespace}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: session.SystemNamespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	return cfg
}

func TestSessionsPageFollowsSessionsAndStopsThem(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("live")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}, Data: map[string]string{"mode": "git"}}
	if err := c.Create(ctx, existing); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: local\n")
	write("extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  a: b\n")

	admin := serve(t, cp.Config, Options{})
	asViewer := serve(t, viewer(t, c), Options{})
	readOnly := serve(t, cp.Config, Options{ReadOnly: true})
	b := browser(t)

	// The page is open before the session starts: the session appears
	// without a reload.
	do(t, b, chromedp.Navigate(admin+"/sessions"), chromedp.WaitVisible(`table.sessions`))
	waitText(t, b, "#live-status", "live")
	run(t, b, chromedp.Evaluate[bool](`window.sameDocument = true`))

	name := "dash" + strings.ReplaceAll(strings.TrimPrefix(ns, "live-"), "-", "")
	cl, err := cluster.New(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := session.Run(runCtx, cl, session.RunOptions{
			Session: session.Options{Name: name, Namespace: ns, Holder: "alice@laptop", RenewInterval: 200 * time.Millisecond},
			Dir:     dir, ReadyTimeout: -1,
			OnIteration: func(session.Iteration) {
				select {
				case <-started:
				default:
					close(started)
				}
			},
		})
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the session ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the session did not apply within a minute")
	}
	row := `tr[data-session="` + name + `"]`
	do(t, b, chromedp.WaitVisible(row))
	if same := run(t, b, chromedp.Evaluate[bool](`window.sameDocument === true`)); !same {
		t.Error("the page was reloaded instead of updated in place")
	}
	text := run(t, b, chromedp.Text(row))
	for _, want := range []string{"active", "alice@laptop", dir, "replace"} {
		if !strings.Contains(text, want) {
			t.Errorf("the session's row lacks %q: %q", want, text)
		}
	}
	screenshot(t, b, "sessions")

	// Its page: what it created and what it changed, never the contents.
	do(t, b, chromedp.Navigate(admin+"/sessions/"+name), chromedp.WaitVisible(`table.changes`))
	text = run(t, b, chromedp.Text(`main`))
	for _, want := range []string{"created ConfigMap/" + ns + "/extra", "changed ConfigMap/" + ns + "/settings", "held by alice@laptop"} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
			t.Errorf("the session's page lacks %q:\n%s", want, text)
		}
	}
	screenshot(t, b, "session")

	// A user without the rights to stop it is refused by the API server,
	// and the session goes on.
	do(t, b, chromedp.Navigate(asViewer+"/sessions/"+name), chromedp.WaitVisible(`button[aria-label="Stop session `+name+`"]`),
		chromedp.Click(`button[aria-label="Stop session `+name+`"]`), chromedp.WaitVisible(`.flash`))
	flash := run(t, b, chromedp.Text(`.flash`))
	if !strings.Contains(flash, "refused") || !strings.Contains(flash, "forbidden") {
		t.Errorf("the viewer's stop says %q, want a refusal", flash)
	}
	if in, err := session.Get(ctx, cl, name); err != nil || in.State != session.StateActive {
		t.Fatalf("after the viewer's refused stop: %+v, %v", in, err)
	}
	screenshot(t, b, "session-refused")

	// Read-only: no action is offered, and a POST is refused.
	do(t, b, chromedp.Navigate(readOnly+"/sessions"), chromedp.WaitVisible(row))
	if n := run(t, b, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post]").length`)); n != 0 {
		t.Errorf("the read-only dashboard offers %d actions", n)
	}
	if code := post(t, readOnly+"/sessions/"+name+"/stop", url.Values{"csrf": {"x"}}, ""); code != http.StatusForbidden {
		t.Errorf("a POST to the read-only dashboard: %d", code)
	}
	// Cross-site and token-less POSTs are refused.
	if code := post(t, admin+"/sessions/"+name+"/stop", url.Values{}, ""); code != http.StatusForbidden {
		t.Errorf("a POST without the form's token: %d", code)
	}
	if code := post(t, admin+"/sessions/"+name+"/stop", url.Values{"csrf": {"x"}}, "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("a cross-origin POST: %d", code)
	}

	// The administrator stops it from the list: the session puts back
	// what it changed, and its row goes, without a reload.
	do(t, b, chromedp.Navigate(admin+"/sessions"), chromedp.WaitVisible(row),
		chromedp.Click(row+` button`), chromedp.WaitVisible(`.flash`))
	flash = run(t, b, chromedp.Text(`.flash`))
	if !strings.Contains(flash, "stopped session "+name) || !strings.Contains(flash, "1 deleted") || !strings.Contains(flash, "1 restored") {
		t.Errorf("the stop says %q", flash)
	}
	do(t, b, chromedp.WaitNotPresent(row))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the session: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the session did not end")
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(existing), &got); err != nil || got.Data["mode"] != "git" {
		t.Errorf("settings after the stop: %v %v", got.Data, err)
	}
	screenshot(t, b, "sessions-stopped")
}

// post sends a form as a script of origin would.
func post(t *testing.T, u string, form url.Values, origin string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A version-mode session runs beside the workload, in a namespace of its
// own: its page shows how that namespace differs from the one it shadows.
func TestSessionPageDiffsAVersionSessionAgainstItsNamespace(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("ver")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]string{"settings": "git", "gone": "x"} {
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"mode": mode}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: local\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  a: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	name := "v" + strings.ReplaceAll(strings.TrimPrefix(ns, "ver-"), "-", "")
	started := make(chan struct{}, 1)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := session.Run(runCtx, cl, session.RunOptions{
			Session: session.Options{Name: name, Namespace: ns, Mode: session.Version, RenewInterval: 200 * time.Millisecond},
			Dir:     dir, ReadyTimeout: -1,
			OnIteration: func(session.Iteration) {
				select {
				case started <- struct{}{}:
				default:
				}
			},
		})
		done <- err
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the session ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the session did not apply within a minute")
	}
	base := serve(t, cp.Config, Options{})
	b := browser(t)
	do(t, b, chromedp.Navigate(base+"/sessions/"+name), chromedp.WaitVisible(`#nsdiff`))
	text := strings.Join(strings.Fields(run(t, b, chromedp.Text(`main`))), " ")
	shadow := ns + "-" + name
	for _, want := range []string{ns + " → " + shadow, "0 alike", "1 only in " + ns, "1 only in " + shadow, "1 different",
		"only in " + ns + ": ConfigMap/" + ns + "/gone", "only in the session: ConfigMap/" + shadow + "/extra"} {
		if !strings.Contains(text, want) {
			t.Errorf("the version session's page lacks %q:\n%s", want, text)
		}
	}
	do(t, b, chromedp.Click(`#nsdiff ~ details summary, details summary`, chromedp.NodeVisible))
	if diff := run(t, b, chromedp.Text(`pre.diff`)); !strings.Contains(diff, "-  mode: git") || !strings.Contains(diff, "+  mode: local") {
		t.Errorf("the settings' diff:\n%s", diff)
	}
	screenshot(t, b, "session-version")
}

// Behind an authenticating proxy, the user it passes is who the request
// is: shown what they may list, nothing without the header.
func TestProxyUserSeesWhatTheirRBACAllows(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("proxy")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	syncWith(t, c, ns, "web", ready(strings.Repeat("a", 40)), nil)
	user := viewer(t, c).Impersonate.UserName
	base := serve(t, cp.Config, Options{Namespace: ns, Auth: &Auth{UserHeader: "X-Forwarded-User", GroupHeader: "X-Forwarded-Groups"}})
	get := func(hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/syncs", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get(nil); code != http.StatusSeeOther {
		t.Errorf("no user: %d, want a redirect to log in", code)
	}
	if code, body := get(map[string]string{"X-Forwarded-User": user, "X-Forwarded-Groups": "team-a, team-b"}); code != http.StatusOK || !strings.Contains(body, `data-sync="`+ns+`/web"`) {
		t.Errorf("%s through the proxy: %d\n%s", user, code, body)
	}
	if code, body := get(map[string]string{"X-Forwarded-User": "nobody-" + ns}); code != http.StatusOK || strings.Contains(body, `data-sync=`) || !strings.Contains(body, "may not list manifestsyncs") {
		t.Errorf("a user without rights through the proxy: %d\n%s", code, body)
	}
}
