package forge

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// No GitHub server runs here: the adapter is held to GitHub's own
// published description of its REST API (testdata/github, trimmed to
// the operations Sluice uses). Every request it sends is validated
// against the description by kin-openapi, and answered with the
// description's examples; the token goes as GitHub documents it.
const githubDescription = "testdata/github/api.github.com.json"

func githubServer(t *testing.T, tokens ...string) (*testenv.OpenAPIServer, string) {
	t.Helper()
	srv := testenv.NewOpenAPIServer(t, githubDescription, "/api/v3")
	srv.Auth = func(r *http.Request, op string) error {
		a := r.Header.Get("Authorization")
		for _, tok := range tokens {
			if a == "Bearer "+tok || a == "token "+tok {
				return nil
			}
		}
		return fmt.Errorf("Authorization %q: not a token GitHub gave", a)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(srv.URL, "http://"), "/api/v3")
	return srv, "http://" + host + "/acme/deploy.git"
}

func TestTheGitHubAdapterKeepsToGitHubsDescription(t *testing.T) {
	ctx := context.Background()
	srv, repo := githubServer(t, "t0ken")
	f, err := For(v1alpha1.ForgeGitHub, repo, Credentials{Username: "x-access-token", Password: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	// Deploy pull requests.
	if _, err := f.Find(ctx, "sluice/pr/main", "main"); err != nil {
		t.Fatal(err)
	}
	pr, err := f.Open(ctx, New{Head: "sluice/pr/main", Base: "main", Title: "Hydrate", Body: "what changed", Labels: []string{"sluice"}, Reviewers: []string{"octocat"}, Draft: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Edit(ctx, pr.Number, "Hydrate again", "more"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx, pr.Number); err != nil {
		t.Fatal(err)
	}
	// Previews of source pull requests.
	r, err := ReviewerFor(v1alpha1.ForgeGitHub, repo, Credentials{Username: "x-access-token", Password: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Comment(ctx, 1347, "<!-- sluice:preview -->", "<!-- sluice:preview -->\nnothing"); err != nil {
		t.Fatal(err)
	}
	if err := r.Status(ctx, "6dcb09b5b57875f334f61aebed695e2e4193db5e", Status{Context: "sluice/preview", State: StateSuccess, Description: "1 folder changes", TargetURL: "https://sluice.example.com/pr/1"}); err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	want := []string{"pulls/list", "pulls/create", "issues/add-labels", "pulls/request-reviewers", "pulls/update", "pulls/update",
		"users/get-authenticated", "issues/list-comments", "issues/create-comment", "repos/create-commit-status"}
	if got := srv.Calls(); !slices.Equal(got, want) {
		t.Errorf("called %q, want %q", got, want)
	}
}

// A request the description does not allow fails the check: a status
// of a state GitHub does not know.
func TestARequestThatBreaksGitHubsDescriptionFails(t *testing.T) {
	srv, repo := githubServer(t, "t0ken")
	r, err := ReviewerFor(v1alpha1.ForgeGitHub, repo, Credentials{Password: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Status(context.Background(), "6dcb09b5b57875f334f61aebed695e2e4193db5e", Status{Context: "sluice/preview", State: "done"})
	f := srv.Failures()
	if err == nil || len(f) != 1 || !strings.Contains(f[0], "repos/create-commit-status") || !strings.Contains(f[0], "state") {
		t.Fatalf("a state of %q: err %v, failures %q", "done", err, f)
	}
	// And a token GitHub never gave is refused, as GitHub would.
	r, _ = ReviewerFor(v1alpha1.ForgeGitHub, repo, Credentials{Password: "stolen"})
	if err := r.Status(context.Background(), "6dcb09b5b57875f334f61aebed695e2e4193db5e", Status{Context: "sluice/preview", State: StateSuccess}); err == nil {
		t.Error("a wrong token was taken")
	}
}

// A GitHub App: its JWT carries the claims GitHub documents and is
// signed by the App's key; the installation of the repository is looked
// up, its token made and kept until five minutes before it expires, and
// the adapter calls the API with it.
func TestAGitHubAppMakesAnInstallationTokenPerRepository(t *testing.T) {
	ctx := context.Background()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	var made atomic.Int32
	srv := testenv.NewOpenAPIServer(t, githubDescription, "/api/v3")
	srv.Auth = func(r *http.Request, op string) error {
		a := r.Header.Get("Authorization")
		switch op {
		case "apps/get-repo-installation", "apps/create-installation-access-token":
			jwt, ok := strings.CutPrefix(a, "Bearer ")
			if !ok {
				return fmt.Errorf("%s needs the App's JWT as a Bearer token, not %q", op, a)
			}
			return checkAppJWT(jwt, &key.PublicKey, "12345", now)
		}
		if a != fmt.Sprintf("Bearer ghs_token%d", made.Load()) && a != fmt.Sprintf("token ghs_token%d", made.Load()) {
			return fmt.Errorf("Authorization %q: not the installation's newest token", a)
		}
		return nil
	}
	srv.Answer = func(r *http.Request, op string) (int, any, bool) {
		if op != "apps/create-installation-access-token" {
			return 0, nil, false
		}
		n := made.Add(1)
		return http.StatusCreated, map[string]any{"token": fmt.Sprintf("ghs_token%d", n), "expires_at": now.Add(time.Hour).Format(time.RFC3339)}, true
	}
	app, err := NewGitHubApp("12345", "", pemKey, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	app.now = func() time.Time { return now }
	repo := strings.Replace(srv.URL, "/api/v3", "/acme/deploy.git", 1)
	tok, err := app.Token(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	again, err := app.Token(ctx, repo)
	if err != nil || again != tok || made.Load() != 1 {
		t.Fatalf("a second token within the hour: %q (first %q), %d made", again, tok, made.Load())
	}
	now = now.Add(56 * time.Minute) // four minutes left: made anew
	if tok, err = app.Token(ctx, repo); err != nil || tok != "ghs_token2" {
		t.Fatalf("four minutes before expiry: %q, %v", tok, err)
	}
	r, err := ReviewerFor(v1alpha1.ForgeGitHub, repo, Credentials{Username: "x-access-token", Password: tok})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Status(ctx, "6dcb09b5b57875f334f61aebed695e2e4193db5e", Status{Context: "sluice/preview", State: StatePending}); err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	want := []string{"apps/get-repo-installation", "apps/create-installation-access-token", "apps/create-installation-access-token", "repos/create-commit-status"}
	if got := srv.Calls(); !slices.Equal(got, want) {
		t.Errorf("called %q, want %q", got, want)
	}

	// A JWT past GitHub's ten minutes is refused by the check: it can fail.
	if err := checkAppJWT(mustJWT(t, key, map[string]any{"iat": now.Unix(), "exp": now.Add(20 * time.Minute).Unix(), "iss": "12345"}), &key.PublicKey, "12345", now); err == nil {
		t.Error("a JWT of twenty minutes passed the check")
	}
	if _, err := NewGitHubApp("12345", "", []byte("not a key"), ""); err == nil {
		t.Error("a key that is not one was taken")
	}
}

// checkAppJWT checks a JWT as GitHub documents an App's: RS256, signed by
// the App's key, iss the App's ID, iat not in the future (GitHub allows
// for drift), exp after now and at most ten minutes after iat.
func checkAppJWT(jwt string, pub *rsa.PublicKey, appID string, now time.Time) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	enc := base64.RawURLEncoding
	var header struct{ Alg, Typ string }
	var claims struct {
		Iat, Exp int64
		Iss      any
	}
	h, err1 := enc.DecodeString(parts[0])
	c, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if errors.Join(err1, err2, err3) != nil || json.Unmarshal(h, &header) != nil || json.Unmarshal(c, &claims) != nil {
		return errors.New("a JWT that does not decode")
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %s: GitHub takes RS256", header.Alg)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return errors.New("not signed by the App's key")
	}
	switch {
	case fmt.Sprint(claims.Iss) != appID:
		return fmt.Errorf("iss %v: not the App's ID", claims.Iss)
	case claims.Iat > now.Unix():
		return errors.New("iat in the future")
	case claims.Exp <= now.Unix():
		return errors.New("expired")
	case claims.Exp-claims.Iat > 600:
		return fmt.Errorf("exp %d s after iat: GitHub takes at most 10 minutes", claims.Exp-claims.Iat)
	}
	return nil
}

func mustJWT(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	s := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	sum := sha256.Sum256([]byte(s))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return s + "." + enc.EncodeToString(sig)
}

// GitHub's rate limit, as GitHub documents its answer (403 with
// X-RateLimit-Remaining 0 and the reset time): the adapter says until
// when, and asks nothing more (no retry).
func TestGitHubsRateLimitIsSaidNotRetried(t *testing.T) {
	srv, repo := githubServer(t, "t0ken")
	reset := time.Now().Add(17 * time.Minute).Truncate(time.Second)
	srv.Headers = func(op string) http.Header {
		if op != "repos/create-commit-status" {
			return nil
		}
		return http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(reset.Unix())}}
	}
	srv.Answer = func(r *http.Request, op string) (int, any, bool) {
		if op != "repos/create-commit-status" {
			return 0, nil, false
		}
		return http.StatusForbidden, map[string]string{"message": "API rate limit exceeded", "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}, true
	}
	r, err := ReviewerFor(v1alpha1.ForgeGitHub, repo, Credentials{Password: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Status(context.Background(), "6dcb09b5b57875f334f61aebed695e2e4193db5e", Status{Context: "sluice/preview", State: StateSuccess})
	var rl *RateLimitedError
	if !errors.As(err, &rl) || !rl.Until.Equal(reset) || !strings.Contains(err.Error(), "no request before") {
		t.Fatalf("a rate limit: %v", err)
	}
	if calls := srv.Calls(); len(calls) != 1 {
		t.Errorf("called %q: one request, not retried, is wanted", calls)
	}
}

// The preview's comment is found and edited in place: Sluice's own (its
// token's user's, or a bot's for an App's token, which has no user),
// never another's that quotes the marker; without one, a comment is
// made.
func TestTheGitHubAdapterEditsItsOwnCommentOnly(t *testing.T) {
	ctx := context.Background()
	marker := "<!-- sluice:preview -->"
	comment := func(id int, login, typ, body string) map[string]any {
		return map[string]any{"id": id, "node_id": "x", "url": "https://api.github.com/repos/acme/deploy/issues/comments/" + fmt.Sprint(id),
			"html_url": fmt.Sprintf("https://github.com/acme/deploy/pull/1#issuecomment-%d", id), "body": body,
			"user": map[string]any{"login": login, "id": id, "type": typ}, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
			"issue_url": "https://api.github.com/repos/acme/deploy/issues/1", "author_association": "NONE"}
	}
	for _, c := range []struct {
		name     string
		me       string // "" for an App's installation token (GET /user refused)
		comments []any
		edited   string // the comment edited; "" when one is made
	}{
		{"its own, beside another's quoting the marker", "sluice-bot", []any{comment(11, "mallory", "User", marker+"\nfake"), comment(12, "sluice-bot", "User", marker+"\nold")}, "12"},
		{"another's only", "sluice-bot", []any{comment(11, "mallory", "User", marker+"\nfake")}, ""},
		{"its own without the marker", "sluice-bot", []any{comment(12, "sluice-bot", "User", "a word")}, ""},
		{"an App's: the bot's, not a user's", "", []any{comment(11, "mallory", "User", marker+"\nfake"), comment(13, "sluice[bot]", "Bot", marker+"\nold")}, "13"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, repo := githubServer(t, "t0ken")
			var editedPath string
			srv.Answer = func(r *http.Request, op string) (int, any, bool) {
				switch op {
				case "users/get-authenticated":
					if c.me == "" {
						return http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"}, true
					}
					return 200, map[string]any{"login": c.me, "id": 1, "type": "User"}, true
				case "issues/list-comments":
					return 200, c.comments, true
				case "issues/update-comment":
					editedPath = r.URL.Path
				}
				return 0, nil, false
			}
			r, err := ReviewerFor(v1alpha1.ForgeGitHub, repo, Credentials{Password: "t0ken"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Comment(ctx, 1, marker, marker+"\nnew"); err != nil {
				t.Fatal(err)
			}
			srv.Check(t)
			calls := srv.Calls()
			switch {
			case c.edited == "" && (editedPath != "" || !slices.Contains(calls, "issues/create-comment")):
				t.Errorf("edited %q (calls %q), want a new comment", editedPath, calls)
			case c.edited != "" && (!strings.HasSuffix(editedPath, "/comments/"+c.edited) || slices.Contains(calls, "issues/create-comment")):
				t.Errorf("edited %q (calls %q), want comment %s", editedPath, calls, c.edited)
			}
		})
	}
}

// A request body with a key the description does not name fails, as a
// misspelt key would pass unnoticed by GitHub.
func TestAKeyGitHubsDescriptionDoesNotNameFails(t *testing.T) {
	srv, _ := githubServer(t, "t0ken")
	for body, wantFail := range map[string]bool{`{"labels": ["sluice"]}`: false, `{"lables": ["sluice"]}`: true} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/repos/acme/deploy/issues/1/labels", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer t0ken")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if failed := resp.StatusCode == http.StatusUnprocessableEntity; failed != wantFail {
			t.Errorf("%s: answered %d", body, resp.StatusCode)
		}
	}
	if f := srv.Failures(); len(f) != 1 || !strings.Contains(f[0], "lables") {
		t.Errorf("failures: %q", f)
	}
}
