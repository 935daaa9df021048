package controller

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/testenv"
)

// A sync whose Secret is a GitHub App's (Flux's keys): the controller
// makes the installation's token through GitHub's API (held to GitHub's
// published description, see internal/forge) and reads and writes the
// repositories with it, which take nothing else.
func TestASyncReadsAndWritesWithAGitHubAppsToken(t *testing.T) {
	t.Parallel()
	var made atomic.Int32
	gh := testenv.NewOpenAPIServer(t, "../forge/testdata/github/api.github.com.json", "/api/v3")
	gh.Auth = func(r *http.Request, op string) error {
		if op != "apps/create-installation-access-token" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ey") {
			return fmt.Errorf("%s with %q", op, r.Header.Get("Authorization"))
		}
		return nil
	}
	gh.Answer = func(r *http.Request, op string) (int, any, bool) {
		made.Add(1)
		return http.StatusCreated, map[string]any{"token": "ghs_installation", "expires_at": time.Now().Add(time.Hour).Format(time.RFC3339)}, true
	}
	e := newEnvWith(t, "x-access-token", "ghs_installation")
	e.start()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: e.ns}, StringData: map[string]string{
		"githubAppID": "12345", "githubAppInstallationID": "7", "githubAppBaseURL": gh.URL,
		"githubAppPrivateKey": string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
	}}); err != nil {
		t.Fatal(err)
	}
	e.apply(strings.NewReplacer("path: deploy/web}", "path: deploy/web, secretRef: {name: app}}",
		"path: apps/web}", "path: apps/web, secretRef: {name: app}}").Replace(webSync))
	ms := e.ready("web", metav1.ConditionTrue, 60*time.Second)
	if ms.Status.Destination.Commit != e.tip("env/dev") {
		t.Fatalf("with the App's token: %+v", ms.Status.Destination)
	}
	gh.Check(t)
	if calls := gh.Calls(); len(calls) == 0 || slices.ContainsFunc(calls, func(c string) bool { return c != "apps/create-installation-access-token" }) || made.Load() != 1 {
		t.Errorf("GitHub was called %q: one token, kept, is wanted", calls)
	}
}
