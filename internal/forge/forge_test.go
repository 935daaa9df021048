package forge

import (
	"errors"
	"strings"
	"testing"
)

func TestForPicksTheForgeAndTheRepository(t *testing.T) {
	tok := Credentials{Password: "t0ken"}
	for _, c := range []struct {
		kind, url string
		creds     Credentials
		want      string // the type, or the error's words
	}{
		{"", "https://github.com/acme/deploy.git", tok, "*forge.gitHub acme/deploy"},
		{"", "https://gitlab.com/acme/platform/deploy.git", tok, "*forge.gitLab acme/platform/deploy"},
		{"gitea", "http://127.0.0.1:3000/acme/deploy.git", tok, "*forge.gitea acme/deploy"},
		{"", "https://git.acme.dev/acme/deploy.git", tok, "which forge is it on"},
		{"", "https://github.com/acme/deploy.git", Credentials{}, ErrNoCredentials.Error()},
		{"", "ssh://git@github.com/acme/deploy.git", tok, "need the repository's https URL"},
		{"", "https://github.com/deploy", tok, "not an OWNER/REPO URL"},
	} {
		f, err := For(c.kind, c.url, c.creds)
		got := ""
		switch v := f.(type) {
		case *gitHub:
			got = "*forge.gitHub " + v.owner + "/" + v.repo
		case *gitLab:
			got = "*forge.gitLab " + v.project
		case *gitea:
			got = "*forge.gitea " + v.owner + "/" + v.repo
		}
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("For(%q, %q) = %s, want %s", c.kind, c.url, got, c.want)
		}
		if c.creds.Password == "" && !errors.Is(err, ErrNoCredentials) {
			t.Errorf("For without credentials: %v", err)
		}
	}
}
