package forge

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
)

// Reviewer is what a preview of a source pull request needs of the
// forge: one comment of its own per pull request, kept current, and a
// commit status on the pull request's head that branch protection can
// require.
type Reviewer interface {
	// Comment makes body the one comment of this account on pull request
	// number whose body opens with marker: edited in place if there is
	// one, added if not. It returns the comment's URL.
	Comment(ctx context.Context, number int, marker, body string) (string, error)
	// Status sets a commit status on sha.
	Status(ctx context.Context, sha string, s Status) error
}

// Status is a commit status: a check of the pull request's head.
type Status struct {
	// Context names the check ("sluice/preview").
	Context string
	// State is one of the State* values.
	State string
	// Description is the check's one line (at most 140 characters: what
	// GitHub keeps).
	Description string
	// TargetURL, if set, is where the check's details are.
	TargetURL string
}

// Commit status states, as GitHub and Gitea name them (GitLab's
// failed for both failure and error).
const (
	StatePending = "pending"
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
)

// maxDescription is the longest description GitHub keeps.
const maxDescription = 140

func (s Status) description() string {
	r := []rune(s.Description)
	if len(r) > maxDescription {
		r = append(r[:maxDescription-1], '…')
	}
	return string(r)
}

// RateLimitedError says the forge holds requests back until Until: the
// caller waits (or gives up), it does not retry in a loop.
type RateLimitedError struct {
	Until time.Time
	Err   error
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%v (the forge's rate limit: no request before %s)", e.Err, e.Until.UTC().Format(time.RFC3339))
}
func (e *RateLimitedError) Unwrap() error { return e.Err }

// reviewScopes say what a token needs, per forge, to comment on pull
// requests and set commit statuses.
var reviewScopes = map[string]string{
	v1alpha1.ForgeGitHub: "a GitHub App, or a fine-grained token, with Pull requests: Read and write (and Contents: Read and write for deploy pull requests, Commit statuses: Read and write for previews), or a classic token with the repo scope",
	v1alpha1.ForgeGitLab: "a project, group or personal access token with the api scope, of the Developer role or above",
	v1alpha1.ForgeGitea:  "a token with the write:issue and write:repository scopes, of a user who may write to the repository",
}

// explain adds to an API error what to grant (401, 403, 404, 422) or
// when to come back (a rate limit).
func explain(kind string, status int, retryAfter time.Time, err error) error {
	if err == nil {
		return nil
	}
	if !retryAfter.IsZero() {
		return &RateLimitedError{Until: retryAfter, Err: err}
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: grant %s", err, reviewScopes[kind])
	}
	return err
}

// retryAfter is when a rate-limited answer says to come back: its
// Retry-After, or its X-RateLimit-Reset once X-RateLimit-Remaining is 0
// (GitHub's, GitLab's and Gitea's headers); zero when it says nothing.
func retryAfter(resp *http.Response, now time.Time) time.Time {
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusForbidden {
		return time.Time{}
	}
	h := resp.Header
	if s := h.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return now.Add(time.Duration(n) * time.Second)
		}
		if t, err := http.ParseTime(s); err == nil {
			return t
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if n, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return time.Unix(n, 0)
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return now.Add(time.Minute)
	}
	return time.Time{}
}
