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
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
)

// GitHubApp is a GitHub App's identity, as an organisation runs its
// bots: it signs a JSON Web Token with the App's private key and
// exchanges it for an installation token per repository (what reads and
// writes the repository over https, and calls the API), kept until five
// minutes before it expires.
type GitHubApp struct {
	// ID is the App's ID (or its client ID).
	ID string
	// InstallationID, if set, is the installation every repository is
	// reached through; 0 finds the repository's own.
	InstallationID int64
	// BaseURL is the API's root: https://api.github.com (the default),
	// or GitHub Enterprise Server's https://HOST/api/v3.
	BaseURL string

	key  *rsa.PrivateKey
	now  func() time.Time
	http *http.Client

	mu            sync.Mutex
	installations map[string]int64      // by owner/repo
	tokens        map[int64]cachedToken // by installation
}

type cachedToken struct {
	token   string
	expires time.Time
}

// refreshBefore is how long before its expiry a token is made anew.
const refreshBefore = 5 * time.Minute

// NewGitHubApp reads an App's identity: its ID, its installation's ID
// ("" to find each repository's), its private key (PEM, PKCS#1 or
// PKCS#8) and the API's root ("" for github.com).
func NewGitHubApp(id, installation string, privateKey []byte, baseURL string) (*GitHubApp, error) {
	if strings.TrimSpace(id) == "" {
		return nil, errors.New("a GitHub App needs its ID (githubAppID)")
	}
	a := &GitHubApp{ID: strings.TrimSpace(id), BaseURL: strings.TrimSuffix(baseURL, "/"), now: time.Now, http: apiClient(),
		installations: map[string]int64{}, tokens: map[int64]cachedToken{}}
	if a.BaseURL == "" {
		a.BaseURL = "https://api.github.com"
	}
	if installation = strings.TrimSpace(installation); installation != "" {
		n, err := strconv.ParseInt(installation, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("githubAppInstallationID %q: not an installation's ID", installation)
		}
		a.InstallationID = n
	}
	block, _ := pem.Decode(privateKey)
	if block == nil {
		return nil, errors.New("githubAppPrivateKey: not a PEM private key (the .pem GitHub gives for the App)")
	}
	switch k, err := x509.ParsePKCS1PrivateKey(block.Bytes); {
	case err == nil:
		a.key = k
	default:
		k8, err8 := x509.ParsePKCS8PrivateKey(block.Bytes)
		rk, ok := k8.(*rsa.PrivateKey)
		if err8 != nil || !ok {
			return nil, errors.New("githubAppPrivateKey: not an RSA private key (the .pem GitHub gives for the App)")
		}
		a.key = rk
	}
	return a, nil
}

// JWT is the App's JSON Web Token, as GitHub documents it: RS256, issued
// 60 seconds in the past (clocks drift), expiring 9 minutes later
// (GitHub takes at most 10), issued by the App's ID.
func (a *GitHubApp) JWT() (string, error) {
	now := a.now()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"iat": now.Add(-60 * time.Second).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": a.ID})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// Token is an installation token for the repository at repoURL: the
// cached one while it has more than five minutes left, else a new one.
func (a *GitHubApp) Token(ctx context.Context, repoURL string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.InstallationID
	if id == 0 {
		u, err := url.Parse(repoURL)
		if err != nil {
			return "", err
		}
		owner, repo, ok := ownerRepo(u.Path)
		if !ok {
			return "", fmt.Errorf("%s: not an OWNER/REPO URL, to find the App's installation on it (set githubAppInstallationID)", repoURL)
		}
		if id = a.installations[owner+"/"+repo]; id == 0 {
			var inst struct {
				ID int64 `json:"id"`
			}
			if err := a.call(ctx, http.MethodGet, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(repo)+"/installation", &inst); err != nil {
				return "", fmt.Errorf("GitHub App %s: the installation on %s/%s: %w", a.ID, owner, repo, err)
			}
			id = inst.ID
			a.installations[owner+"/"+repo] = id
		}
	}
	if t, ok := a.tokens[id]; ok && a.now().Add(refreshBefore).Before(t.expires) {
		return t.token, nil
	}
	var tok struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := a.call(ctx, http.MethodPost, fmt.Sprintf("/app/installations/%d/access_tokens", id), &tok); err != nil {
		return "", fmt.Errorf("GitHub App %s: a token of installation %d: %w", a.ID, id, err)
	}
	if tok.Token == "" {
		return "", fmt.Errorf("GitHub App %s: installation %d answered no token", a.ID, id)
	}
	a.tokens[id] = cachedToken{token: tok.Token, expires: tok.ExpiresAt}
	return tok.Token, nil
}

// call calls the API as the App (its JWT).
func (a *GitHubApp) call(ctx context.Context, method, path string, out any) error {
	jwt, err := a.JWT()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, a.BaseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		err := fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden {
			return fmt.Errorf("%w: check the App's ID and private key, and that it is installed on the repository", err)
		}
		return explain(v1alpha1.ForgeGitHub, resp.StatusCode, retryAfter(resp, a.now()), err)
	}
	return json.Unmarshal(data, out)
}
