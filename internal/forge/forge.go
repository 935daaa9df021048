// Package forge opens, updates and closes the pull requests Sluice
// proposes, on GitHub, GitLab and Gitea, behind one small interface: the
// logic (one pull request per base branch, kept current, closed when
// nothing is left) lives in its callers and is the same for each forge.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/egress"
)

// PullRequest is a pull (merge) request as the forge has it.
type PullRequest struct {
	Number int
	URL    string
	// State is open, merged or closed (v1alpha1.PullRequest*).
	State       string
	Title, Body string
	Head, Base  string
	// MergeCommit is the base's commit that merged it.
	MergeCommit string
}

// New is a pull request to open.
type New struct {
	Head, Base, Title, Body string
	Labels, Reviewers       []string
	Draft, AutoMerge        bool
}

// Forge is one repository on a forge.
type Forge interface {
	// Find is the newest pull request from head to base, in any state;
	// nil when there is none.
	Find(ctx context.Context, head, base string) (*PullRequest, error)
	// Open opens one, with its labels, reviewers and auto-merge.
	Open(ctx context.Context, n New) (*PullRequest, error)
	// Edit changes an open one's title and body.
	Edit(ctx context.Context, number int, title, body string) error
	// Close closes an open one without merging it.
	Close(ctx context.Context, number int) error
}

// Credentials reach the forge's API: a token, as the password of the
// repository's https credentials (or a user's password, for Gitea).
type Credentials struct {
	Username, Password string
}

// apiClient reaches a forge's API within the egress policy of each
// request's context (a controller's: the forge's host is a tenant's
// destination).
func apiClient() *http.Client {
	return &http.Client{Transport: egress.ByContext{}, Timeout: 30 * time.Second}
}

// ErrNoCredentials says the repository was reached without credentials,
// which no forge takes to open a pull request.
var ErrNoCredentials = errors.New("no credentials for the forge's API: give the destination's git credentials a token (a secretRef with a password or bearerToken, or SLUICE_GIT_TOKEN)")

// For is the forge of kind (v1alpha1.Forge*, or "" to tell from the
// host) holding the repository at repoURL (https or http on loopback).
func For(kind, repoURL string, c Credentials) (Forge, error) {
	return open(kind, repoURL, c)
}

// ReviewerFor is the forge of kind holding the source repository at
// repoURL, for the comments and statuses of its pull requests.
func ReviewerFor(kind, repoURL string, c Credentials) (Reviewer, error) {
	return open(kind, repoURL, c)
}

// adapter is what each forge's adapter is.
type adapter interface {
	Forge
	Reviewer
}

func open(kind, repoURL string, c Credentials) (adapter, error) {
	if kind == "" {
		kind = v1alpha1.ForgeOf(repoURL)
	}
	u, err := url.Parse(repoURL)
	if err != nil {
		return nil, errors.New("pull requests need the repository's https URL, to find the forge's API")
	}
	u.User = nil
	if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("%s: pull requests need the repository's https URL, to find the forge's API", u)
	}
	owner, repo, ok := ownerRepo(u.Path)
	if !ok {
		return nil, fmt.Errorf("%s: not an OWNER/REPO URL", u)
	}
	if c.Password == "" {
		return nil, ErrNoCredentials
	}
	switch kind {
	case v1alpha1.ForgeGitea:
		return newGitea(u, owner, repo, c), nil
	case v1alpha1.ForgeGitHub:
		return newGitHub(u, owner, repo, c)
	case v1alpha1.ForgeGitLab:
		return newGitLab(u, owner, repo, c)
	case "":
		return nil, fmt.Errorf("%s: which forge is it on? set destination.pullRequest.forge (github, gitlab or gitea)", u)
	}
	return nil, fmt.Errorf("forge %q: github, gitlab or gitea", kind)
}

// ownerRepo splits "/owner/repo.git" (GitLab's groups may nest).
func ownerRepo(p string) (string, string, bool) {
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	i := strings.LastIndex(p, "/")
	if i <= 0 || i == len(p)-1 {
		return "", "", false
	}
	return p[:i], p[i+1:], true
}
