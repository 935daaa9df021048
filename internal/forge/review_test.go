package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// On a real Gitea: Sluice's comment on a pull request is one, edited in
// place at each push; a comment of someone else's that opens with the
// same marker is left alone; the commit status lands on the head.
func TestAReviewerKeepsOneCommentAndSetsTheStatusOnGitea(t *testing.T) {
	ctx := context.Background()
	g := testenv.StartGitea(t)
	clone := g.CreateRepo(t, "src")
	w := testenv.NewWork(t, g.PushURL(clone))
	w.Write(map[string]string{"a.yaml": "a: 1\n"}).Commit("one")
	w.Push("main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "change")
	head := w.Write(map[string]string{"a.yaml": "a: 2\n"}).Commit("two")
	w.Push("change")
	number := g.OpenPullRequest(t, g.User, g.Password, "src", "change", "main", "a is 2")

	// Someone else's comment with Sluice's marker, to lure it.
	g.CreateUser(t, "mallory", "Mallory-test-1")
	if err := g.APIAs("mallory", "Mallory-test-1", http.MethodPost, fmt.Sprintf("repos/%s/src/issues/%d/comments", g.User, number), map[string]string{"body": "<!-- m -->\nnot Sluice's"}, nil); err != nil {
		t.Fatal(err)
	}

	r, err := ReviewerFor(v1alpha1.ForgeGitea, clone, Credentials{Username: g.User, Password: g.Password})
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Comment(ctx, number, "<!-- m -->", "<!-- m -->\nfirst")
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Comment(ctx, number, "<!-- m -->", "<!-- m -->\nsecond")
	if err != nil {
		t.Fatal(err)
	}
	if first == "" || again != first {
		t.Errorf("the second comment is at %q, the first at %q: one comment, edited, is wanted", again, first)
	}
	var comments []struct {
		Body string `json:"body"`
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}
	g.API(t, http.MethodGet, fmt.Sprintf("repos/%s/src/issues/%d/comments", g.User, number), nil, &comments)
	var bodies []string
	for _, c := range comments {
		bodies = append(bodies, c.User.Login+": "+c.Body)
	}
	if want := []string{"mallory: <!-- m -->\nnot Sluice's", g.User + ": <!-- m -->\nsecond"}; strings.Join(bodies, "|") != strings.Join(want, "|") {
		t.Errorf("comments %q, want %q", bodies, want)
	}

	long := strings.Repeat("é", 200)
	if err := r.Status(ctx, head, Status{Context: "sluice/preview", State: StateFailure, Description: long, TargetURL: "http://example.com/pr/1"}); err != nil {
		t.Fatal(err)
	}
	var statuses []struct {
		Context     string `json:"context"`
		Status      string `json:"status"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
	}
	g.API(t, http.MethodGet, fmt.Sprintf("repos/%s/src/commits/%s/statuses", g.User, head), nil, &statuses)
	if len(statuses) != 1 || statuses[0].Context != "sluice/preview" || statuses[0].Status != "failure" || statuses[0].TargetURL != "http://example.com/pr/1" || len([]rune(statuses[0].Description)) != maxDescription {
		t.Errorf("statuses %+v", statuses)
	}
}

// A rate-limited answer is waited out, never retried at once: the time
// comes from the headers GitHub documents (Retry-After, then
// X-RateLimit-Remaining and X-RateLimit-Reset); a refusal says what to
// grant.
func TestRateLimitsAndRefusalsAreSaid(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	resp := func(code int, h ...string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		for i := 0; i < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	for _, c := range []struct {
		resp *http.Response
		want time.Time
	}{
		{resp(http.StatusForbidden, "Retry-After", "30"), now.Add(30 * time.Second)},
		{resp(http.StatusTooManyRequests, "Retry-After", "Wed, 15 Jan 2027 08:00:00 GMT"), time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)},
		{resp(http.StatusForbidden, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1800000600"), time.Unix(1_800_000_600, 0)},
		{resp(http.StatusForbidden, "X-RateLimit-Remaining", "12", "X-RateLimit-Reset", "1800000600"), time.Time{}},
		{resp(http.StatusTooManyRequests), now.Add(time.Minute)},
		{resp(http.StatusInternalServerError, "Retry-After", "30"), time.Time{}},
	} {
		if got := retryAfter(c.resp, now); !got.Equal(c.want) {
			t.Errorf("%d %v: retry after %v, want %v", c.resp.StatusCode, c.resp.Header, got, c.want)
		}
	}
	err := explain(v1alpha1.ForgeGitLab, http.StatusForbidden, time.Time{}, errors.New("403 Forbidden"))
	if !strings.Contains(err.Error(), "api scope") {
		t.Errorf("a refusal: %v", err)
	}
	var rl *RateLimitedError
	if err := explain(v1alpha1.ForgeGitHub, http.StatusForbidden, now, errors.New("403")); !errors.As(err, &rl) || !rl.Until.Equal(now) {
		t.Errorf("a rate limit: %v", err)
	}
}
