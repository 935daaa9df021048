package controller

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// The controller's dashboard serves each person as themselves: nobody
// without a token the API server accepts, a ServiceAccount's token
// showing only the syncs its RBAC lets it list, what will change
// computed by the controller's own engines, and an action the person may
// not do refused by the API server (the dashboard acts as them).
func TestDashboardServesEachPersonAsThemselves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addrs, _ := e.start(func(o *Options) { o.DashboardAddr = "127.0.0.1:0" })
	if addrs.Dashboard == "" {
		t.Fatal("no dashboard address")
	}
	base := "http://" + addrs.Dashboard
	ctx := context.Background()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 30*time.Second)

	// A sync in another namespace alice may not see.
	other := testenv.Namespace("other")
	if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}); err != nil {
		t.Fatal(err)
	}
	hidden := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "secret-app"}, Spec: v1alpha1.ManifestSyncSpec{
		Suspend: true, Source: v1alpha1.Source{Repo: e.appURL, Path: "deploy/api"}, Destination: v1alpha1.Destination{Repo: e.dstURL, Branch: "env/x", Path: "x"}}}
	if err := e.c.Create(ctx, hidden); err != nil {
		t.Fatal(err)
	}

	token := alice(t, e)
	w := newBrowserless(t, base)
	get, postForm := w.get, w.postForm
	bearer := map[string]string{"Authorization": "Bearer " + token}

	// Nobody: sent to log in.
	if code, _, h := get("/syncs", nil); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Errorf("GET /syncs without a token: %d %s", code, h.Get("Location"))
	}
	if code, _ := postForm("/login", url.Values{"token": {"not-a-token"}}); code != http.StatusUnauthorized {
		t.Errorf("a bad token logs in: %d", code)
	}

	// A login's redirect stays on the dashboard, as an attacker's link
	// would have it leave: browsers read "/\\evil.example" as another host.
	for _, next := range []string{`/\evil.example/x`, "//evil.example/x", "https://evil.example/x", "/\t/evil.example/x", `\\evil.example`} {
		code, h := newBrowserless(t, base).postForm("/login", url.Values{"token": {token}, "next": {next}})
		if code != http.StatusSeeOther || h.Get("Location") != "/syncs" {
			t.Errorf("next=%q: %d, Location %q", next, code, h.Get("Location"))
		}
	}
	// Headers are bounded in size.
	if code, _, _ := get("/syncs", map[string]string{"X-Padding": strings.Repeat("x", 128<<10)}); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 128 KiB header: %d", code)
	}

	// alice, by bearer token: her namespace's sync, not the other's.
	code, body, _ := get("/syncs", bearer)
	if code != http.StatusOK || !strings.Contains(body, `data-sync="`+e.ns+`/web"`) || strings.Contains(body, "secret-app") {
		t.Errorf("alice's /syncs: %d, web shown %v, secret-app shown %v", code, strings.Contains(body, e.ns+"/web"), strings.Contains(body, "secret-app"))
	}
	if code, body, _ := get("/syncs/"+other+"/secret-app", bearer); code != http.StatusForbidden || !strings.Contains(body, "may not get manifestsyncs.sluice.dev secret-app") {
		t.Errorf("alice's look at another namespace's sync: %d\n%s", code, body)
	}
	// What will change, by the controller's engines: nothing, right after
	// its hydration.
	if code, body, _ := get("/syncs/"+e.ns+"/web/changes", bearer); code != http.StatusOK || !strings.Contains(body, "Nothing will change") {
		t.Errorf("what will change for web: %d\n%s", code, body)
	}

	// alice logs in on the page (a cookie from then on) and tries an
	// action she may not do: the API server refuses it, as her.
	refusedAs(t, w, token, "system:serviceaccount:"+e.ns+":alice")
	// Logged out, she is nobody again.
	postForm("/logout", url.Values{})
	if code, _, _ := get("/syncs", nil); code != http.StatusSeeOther {
		t.Errorf("after logout: %d", code)
	}
}

// alice is a ServiceAccount that may read the syncs of the test's
// namespace, nothing else; her token.
func alice(t *testing.T, e *env) string {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "alice"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "sync-reader"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"manifestsyncs"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "alice-reads"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "sync-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: e.ns, Name: "alice"}}},
	} {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return tokenOf(t, e.ns, "alice")
}

// tokenOf is a token of a ServiceAccount, as kubectl create token gives.
func tokenOf(t *testing.T, ns, name string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// browserless is an HTTP client keeping cookies and not following
// redirects, for what a test checks of the responses themselves.
type browserless struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newBrowserless(t *testing.T, base string) *browserless {
	jar, _ := cookiejar.New(nil)
	return &browserless{t: t, base: base, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browserless) get(path string, hdr map[string]string) (int, string, http.Header) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func (b *browserless) postForm(path string, form url.Values) (int, http.Header) {
	b.t.Helper()
	resp, err := b.hc.PostForm(b.base+path, form)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// refusedAs runs an action alice may not do, logged in, and checks the
// API server refused it as her.
func refusedAs(t *testing.T, w *browserless, token, user string) {
	t.Helper()
	if code, h := w.postForm("/login", url.Values{"token": {token}, "next": {"/sessions"}}); code != http.StatusSeeOther || h.Get("Location") != "/sessions" {
		t.Fatalf("login: %d %s", code, h.Get("Location"))
	}
	code, body, _ := w.get("/sessions", nil)
	if code != http.StatusOK {
		t.Fatalf("/sessions: %d", code)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no action form on /sessions:\n%s", body)
	}
	code, h := w.postForm("/sessions/cleanup", url.Values{"csrf": {m[1]}})
	if code != http.StatusSeeOther {
		t.Fatalf("cleanup: %d", code)
	}
	_, body, _ = w.get(h.Get("Location"), nil)
	body = html.UnescapeString(body)
	if !strings.Contains(body, "refused") || !strings.Contains(body, `User "`+user+`" cannot list resource "leases"`) {
		t.Errorf("the cleanup is not refused as %s:\n%s", user, body)
	}
}

// config/dashboard grants the controller what its dashboard needs, and no
// person more than their own RBAC: run as its ServiceAccount, it reviews
// alice's token, shows her her syncs and acts as her.
func TestDashboardInstall(t *testing.T) {
	e := newEnv(t)
	kinds, args := install(t, e, "dashboard")
	if kinds["ClusterRole"] != 2 || kinds["Service"] != 2 || !slices.Contains(args, "--dashboard-addr=:8088") {
		t.Errorf("config/dashboard: %v, args %v", kinds, args)
	}
	// The ServiceAccount's own token, as in its pod (impersonating it
	// would let the dashboard's own impersonation through as admin).
	asSA := rest.AnonymousClientConfig(cp.Config)
	asSA.BearerToken = tokenOf(t, "sluice-system", "sluice-controller")
	addrs, _ := e.start(func(o *Options) { o.Config, o.DashboardAddr = asSA, "127.0.0.1:0" })
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	token := alice(t, e)
	w := newBrowserless(t, "http://"+addrs.Dashboard)
	code, body, _ := w.get("/syncs", map[string]string{"Authorization": "Bearer " + token})
	if code != http.StatusOK || !strings.Contains(body, `data-sync="`+e.ns+`/web"`) {
		t.Fatalf("alice's /syncs through the installed controller: %d\n%s", code, body)
	}
	refusedAs(t, w, token, "system:serviceaccount:"+e.ns+":alice")
}
