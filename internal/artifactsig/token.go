package artifactsig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Audience is the audience of the identity tokens keyless signing sends
// Fulcio: what Sigstore's public Fulcio accepts, and what a Kubernetes
// projected service account token, a GitHub Actions token and a GitLab
// CI id_token are asked for.
const Audience = "sigstore"

// maxToken bounds an identity token read.
const maxToken = 64 << 10

// TokenFile reads an identity token from a file at each signature: a
// projected service account token, which the kubelet refreshes on disk.
func TokenFile(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxToken+1))
		if err != nil {
			return "", err
		}
		if len(b) > maxToken {
			return "", fmt.Errorf("%s is not an identity token: over %d bytes", path, maxToken)
		}
		return strings.TrimSpace(string(b)), nil
	}
}

// CIToken finds the identity token of a CI job, as cosign does:
// $SIGSTORE_ID_TOKEN (GitLab CI's id_tokens, or any CI's), else GitHub
// Actions' token of audience sigstore, asked of the runner
// ($ACTIONS_ID_TOKEN_REQUEST_URL with $ACTIONS_ID_TOKEN_REQUEST_TOKEN:
// the workflow needs permissions: id-token: write). getenv is os.Getenv
// but for tests.
func CIToken(getenv func(string) string, client *http.Client) (func(context.Context) (string, error), error) {
	if t := getenv("SIGSTORE_ID_TOKEN"); t != "" {
		return func(context.Context) (string, error) { return t, nil }, nil
	}
	reqURL, reqToken := getenv("ACTIONS_ID_TOKEN_REQUEST_URL"), getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
	if reqURL == "" || reqToken == "" {
		return nil, errors.New("no identity token: set $SIGSTORE_ID_TOKEN (GitLab CI: id_tokens with aud: sigstore), run in GitHub Actions with permissions: id-token: write, or pass --identity-token FILE")
	}
	u, err := url.Parse(reqURL)
	if err != nil {
		return nil, errors.New("$ACTIONS_ID_TOKEN_REQUEST_URL is not a URL")
	}
	q := u.Query()
	q.Set("audience", Audience)
	u.RawQuery = q.Encode()
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "bearer "+reqToken)
		resp, err := client.Do(req)
		if err != nil {
			return "", fmt.Errorf("asking GitHub Actions for an identity token: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("asking GitHub Actions for an identity token: %s (does the workflow have permissions: id-token: write?)", resp.Status)
		}
		var body struct {
			Value string `json:"value"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxToken)).Decode(&body); err != nil || body.Value == "" {
			return "", errors.New("asking GitHub Actions for an identity token: the answer holds none")
		}
		return body.Value, nil
	}, nil
}
