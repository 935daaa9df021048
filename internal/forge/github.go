package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"

	"sluice.dev/sluice/api/v1alpha1"
)

// gitHub speaks GitHub's (and GitHub Enterprise's) pull requests through
// its official client. No GitHub server runs in this project's tests: the
// code stays this thin, the logic above it is the one the Gitea tests
// exercise.
type gitHub struct {
	c           *github.Client
	graphql     string
	token       string
	owner, repo string
}

func newGitHub(u *url.URL, owner, repo string, c Credentials) (*gitHub, error) {
	cl := github.NewClient(apiClient()).WithAuthToken(c.Password)
	graphql := "https://api.github.com/graphql"
	if u.Host != "github.com" {
		base := *u
		base.Path = "/api/v3/"
		var err error
		if cl, err = cl.WithEnterpriseURLs(base.String(), base.String()); err != nil {
			return nil, err
		}
		base.Path = "/api/graphql"
		graphql = base.String()
	}
	return &gitHub{c: cl, graphql: graphql, token: c.Password, owner: owner, repo: repo}, nil
}

func (g *gitHub) out(p *github.PullRequest) *PullRequest {
	pr := &PullRequest{Number: p.GetNumber(), URL: p.GetHTMLURL(), Title: p.GetTitle(), Body: p.GetBody(),
		Head: p.GetHead().GetRef(), Base: p.GetBase().GetRef(), State: v1alpha1.PullRequestOpen}
	switch {
	case p.GetMerged() || p.MergedAt != nil:
		pr.State, pr.MergeCommit = v1alpha1.PullRequestMerged, p.GetMergeCommitSHA()
	case p.GetState() == "closed":
		pr.State = v1alpha1.PullRequestClosed
	}
	return pr
}

func (g *gitHub) Find(ctx context.Context, head, base string) (*PullRequest, error) {
	prs, _, err := g.c.PullRequests.List(ctx, g.owner, g.repo, &github.PullRequestListOptions{
		State: "all", Head: g.owner + ":" + head, Base: base, Sort: "created", Direction: "desc"})
	if err != nil {
		return nil, fmt.Errorf("github %s/%s: listing pull requests: %w", g.owner, g.repo, g.explained(err))
	}
	if len(prs) == 0 {
		return nil, nil
	}
	return g.out(prs[0]), nil
}

func (g *gitHub) Open(ctx context.Context, n New) (*PullRequest, error) {
	p, _, err := g.c.PullRequests.Create(ctx, g.owner, g.repo, &github.NewPullRequest{Title: &n.Title, Body: &n.Body, Head: &n.Head, Base: &n.Base, Draft: &n.Draft})
	if err != nil {
		return nil, fmt.Errorf("github %s/%s: opening a pull request: %w", g.owner, g.repo, g.explained(err))
	}
	pr := g.out(p)
	if len(n.Labels) > 0 {
		if err := g.addLabels(ctx, p.GetNumber(), n.Labels); err != nil {
			return pr, fmt.Errorf("github %s/%s: labelling #%d: %w", g.owner, g.repo, p.GetNumber(), err)
		}
	}
	if len(n.Reviewers) > 0 {
		if _, _, err := g.c.PullRequests.RequestReviewers(ctx, g.owner, g.repo, p.GetNumber(), github.ReviewersRequest{Reviewers: n.Reviewers}); err != nil {
			return pr, fmt.Errorf("github %s/%s: asking for reviews on #%d: %w", g.owner, g.repo, p.GetNumber(), err)
		}
	}
	if n.AutoMerge {
		if err := g.autoMerge(ctx, p.GetNodeID()); err != nil {
			return pr, fmt.Errorf("github %s/%s: auto-merge of #%d: %w", g.owner, g.repo, p.GetNumber(), err)
		}
	}
	return pr, nil
}

// autoMerge asks GitHub to merge once the checks pass: only its GraphQL
// API can.
func (g *gitHub) autoMerge(ctx context.Context, nodeID string) error {
	body, _ := json.Marshal(map[string]any{
		"query":     "mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }",
		"variables": map[string]string{"id": nodeID},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.graphql, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if len(out.Errors) > 0 {
		return fmt.Errorf("%s", out.Errors[0].Message)
	}
	return nil
}

func (g *gitHub) Edit(ctx context.Context, number int, title, body string) error {
	_, _, err := g.c.PullRequests.Edit(ctx, g.owner, g.repo, number, &github.PullRequest{Title: &title, Body: &body})
	return err
}

func (g *gitHub) Close(ctx context.Context, number int) error {
	_, _, err := g.c.PullRequests.Edit(ctx, g.owner, g.repo, number, &github.PullRequest{State: github.Ptr("closed")})
	return err
}

func (g *gitHub) Comment(ctx context.Context, number int, marker, body string) (string, error) {
	// An installation token (a GitHub App's) has no user: its comments
	// are a bot's, and the marker tells Sluice's.
	me := ""
	if u, _, err := g.c.Users.Get(ctx, ""); err == nil {
		me = u.GetLogin()
	}
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for page := 0; page < 50; page++ {
		comments, resp, err := g.c.Issues.ListComments(ctx, g.owner, g.repo, number, opts)
		if err != nil {
			return "", fmt.Errorf("github %s/%s: listing the comments of #%d: %w", g.owner, g.repo, number, g.explained(err))
		}
		for _, c := range comments {
			mine := me != "" && c.GetUser().GetLogin() == me || me == "" && c.GetUser().GetType() == "Bot"
			if mine && strings.HasPrefix(c.GetBody(), marker) {
				edited, _, err := g.c.Issues.EditComment(ctx, g.owner, g.repo, c.GetID(), &github.IssueComment{Body: &body})
				if err != nil {
					return "", fmt.Errorf("github %s/%s: editing comment %d: %w", g.owner, g.repo, c.GetID(), g.explained(err))
				}
				return edited.GetHTMLURL(), nil
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	made, _, err := g.c.Issues.CreateComment(ctx, g.owner, g.repo, number, &github.IssueComment{Body: &body})
	if err != nil {
		return "", fmt.Errorf("github %s/%s: commenting on #%d: %w", g.owner, g.repo, number, g.explained(err))
	}
	return made.GetHTMLURL(), nil
}

func (g *gitHub) Status(ctx context.Context, sha string, s Status) error {
	st := &github.RepoStatus{State: &s.State, Context: &s.Context, Description: github.Ptr(s.description())}
	if s.TargetURL != "" {
		st.TargetURL = &s.TargetURL
	}
	if _, _, err := g.c.Repositories.CreateStatus(ctx, g.owner, g.repo, sha, st); err != nil {
		return fmt.Errorf("github %s/%s: setting the status of %s: %w", g.owner, g.repo, sha, g.explained(err))
	}
	return nil
}

// explained is an error of the GitHub client with what to grant, or when
// to come back.
func (g *gitHub) explained(err error) error {
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	var e *github.ErrorResponse
	switch {
	case errors.As(err, &rl):
		return &RateLimitedError{Until: rl.Rate.Reset.Time, Err: err}
	case errors.As(err, &abuse):
		until := time.Now().Add(time.Minute)
		if abuse.RetryAfter != nil {
			until = time.Now().Add(*abuse.RetryAfter)
		}
		return &RateLimitedError{Until: until, Err: err}
	case errors.As(err, &e) && e.Response != nil:
		return explain(v1alpha1.ForgeGitHub, e.Response.StatusCode, retryAfter(e.Response, time.Now()), err)
	}
	return err
}

// addLabels adds labels to an issue or pull request in the body GitHub's
// description gives ({"labels": [...]}; the client sends a bare array,
// which the description does not allow).
func (g *gitHub) addLabels(ctx context.Context, number int, labels []string) error {
	req, err := g.c.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/%s/issues/%d/labels", url.PathEscape(g.owner), url.PathEscape(g.repo), number), map[string][]string{"labels": labels})
	if err != nil {
		return err
	}
	_, err = g.c.Do(ctx, req, nil)
	return g.explained(err)
}
