package artifactsig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Where a CI job's identity token comes from, as cosign finds it:
// $SIGSTORE_ID_TOKEN first (GitLab CI's id_tokens), else GitHub Actions'
// token request, which GitHub documents as a GET of
// $ACTIONS_ID_TOKEN_REQUEST_URL with an audience parameter and the
// request token as a bearer, answered {"value": TOKEN}. No GitHub runner
// can run here: the server below answers as that documentation says,
// and checks the request against it.
func TestTheCIsIdentityToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Query().Get("audience") != Audience || r.URL.Query().Get("api-version") != "2.0" || r.Header.Get("Authorization") != "bearer request-token" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{"count":1,"value":"github-oidc-token"}`))
	}))
	defer srv.Close()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	ctx := context.Background()
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // the token, or the error's text
	}{
		{"SIGSTORE_ID_TOKEN", map[string]string{"SIGSTORE_ID_TOKEN": "gitlab-token", "ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL}, "gitlab-token"},
		{"GitHub Actions", map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL + "/?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "request-token"}, "github-oidc-token"},
		{"GitHub Actions refusing", map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL + "/?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "stale"}, "id-token: write"},
		{"nothing", map[string]string{}, "set $SIGSTORE_ID_TOKEN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := CIToken(env(c.env), srv.Client())
			var got string
			if err == nil {
				got, err = tok(ctx)
			}
			switch {
			case err != nil && !strings.Contains(err.Error(), c.want):
				t.Errorf("error %v, want %q", err, c.want)
			case err == nil && got != c.want:
				t.Errorf("token %q, want %q", got, c.want)
			}
		})
	}
	// A projected token's file is read at each signature: the kubelet
	// rewrites it.
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("first\n"), 0o600)
	read := TokenFile(p)
	if got, _ := read(ctx); got != "first" {
		t.Errorf("token file: %q", got)
	}
	os.WriteFile(p, []byte("second"), 0o600)
	if got, _ := read(ctx); got != "second" {
		t.Errorf("the rewritten token file: %q", got)
	}
}
