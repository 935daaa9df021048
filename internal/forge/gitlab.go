package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go/v2"

	"sluice.dev/sluice/api/v1alpha1"
)

// gitLab speaks GitLab's merge requests through its official client. No
// GitLab server runs in this project's tests: every request is held to
// GitLab's own API description (testdata/gitlab), and the logic above it
// is the one the Gitea tests exercise.
type gitLab struct {
	c       *gitlab.Client
	project string // OWNER/REPO (groups may nest)
}

func newGitLab(u *url.URL, owner, repo string, c Credentials) (*gitLab, error) {
	base := *u
	base.Path = "/api/v4"
	cl, err := gitlab.NewClient(c.Password, gitlab.WithBaseURL(base.String()), gitlab.WithHTTPClient(apiClient()))
	if err != nil {
		return nil, err
	}
	return &gitLab{c: cl, project: owner + "/" + repo}, nil
}

func (g *gitLab) Find(ctx context.Context, head, base string) (*PullRequest, error) {
	mrs, _, err := g.c.MergeRequests.ListProjectMergeRequests(g.project, &gitlab.ListProjectMergeRequestsOptions{
		SourceBranch: &head, TargetBranch: &base, OrderBy: gitlab.Ptr("created_at"), Sort: gitlab.Ptr("desc"),
	}, gitlab.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("gitlab %s: listing merge requests: %w", g.project, g.explained(err))
	}
	if len(mrs) == 0 {
		return nil, nil
	}
	m := mrs[0]
	pr := &PullRequest{Number: int(m.IID), URL: m.WebURL, Title: m.Title, Body: m.Description, Head: m.SourceBranch, Base: m.TargetBranch, State: v1alpha1.PullRequestOpen}
	switch m.State {
	case "merged":
		pr.State, pr.MergeCommit = v1alpha1.PullRequestMerged, m.MergeCommitSHA
		if pr.MergeCommit == "" {
			pr.MergeCommit = m.SquashCommitSHA
		}
	case "closed", "locked":
		pr.State = v1alpha1.PullRequestClosed
	}
	return pr, nil
}

func (g *gitLab) Open(ctx context.Context, n New) (*PullRequest, error) {
	title := n.Title
	if n.Draft && !strings.HasPrefix(title, "Draft:") {
		title = "Draft: " + title
	}
	// GitLab's description types labels as an array of strings; the
	// client sends them joined by commas, which GitLab also takes but the
	// description does not allow. Sent as the description says.
	body := struct {
		Title        string   `json:"title"`
		Description  string   `json:"description"`
		SourceBranch string   `json:"source_branch"`
		TargetBranch string   `json:"target_branch"`
		Labels       []string `json:"labels,omitempty"`
	}{title, n.Body, n.Head, n.Base, n.Labels}
	req, err := g.c.NewRequest(http.MethodPost, "projects/"+gitlab.PathEscape(g.project)+"/merge_requests", body, []gitlab.RequestOptionFunc{gitlab.WithContext(ctx)})
	if err != nil {
		return nil, fmt.Errorf("gitlab %s: opening a merge request: %w", g.project, err)
	}
	m := new(gitlab.MergeRequest)
	if _, err := g.c.Do(req, m); err != nil {
		return nil, fmt.Errorf("gitlab %s: opening a merge request: %w", g.project, err)
	}
	pr := &PullRequest{Number: int(m.IID), URL: m.WebURL, Title: m.Title, Body: m.Description, Head: n.Head, Base: n.Base, State: v1alpha1.PullRequestOpen}
	if len(n.Reviewers) > 0 {
		var ids []int64
		for _, name := range n.Reviewers {
			users, _, err := g.c.Users.ListUsers(&gitlab.ListUsersOptions{Username: gitlab.Ptr(name)}, gitlab.WithContext(ctx))
			if err != nil || len(users) == 0 {
				return pr, fmt.Errorf("gitlab: reviewer %s: no such user (%v)", name, err)
			}
			ids = append(ids, users[0].ID)
		}
		if _, _, err := g.c.MergeRequests.UpdateMergeRequest(g.project, m.IID, &gitlab.UpdateMergeRequestOptions{ReviewerIDs: &ids}, gitlab.WithContext(ctx)); err != nil {
			return pr, fmt.Errorf("gitlab %s: asking for reviews: %w", g.project, err)
		}
	}
	if n.AutoMerge {
		if _, _, err := g.c.MergeRequests.AcceptMergeRequest(g.project, m.IID, &gitlab.AcceptMergeRequestOptions{AutoMerge: gitlab.Ptr(true)}, gitlab.WithContext(ctx)); err != nil {
			return pr, fmt.Errorf("gitlab %s: asking for auto-merge: %w", g.project, err)
		}
	}
	return pr, nil
}

func (g *gitLab) Edit(ctx context.Context, number int, title, body string) error {
	_, _, err := g.c.MergeRequests.UpdateMergeRequest(g.project, int64(number), &gitlab.UpdateMergeRequestOptions{Title: &title, Description: &body}, gitlab.WithContext(ctx))
	return err
}

func (g *gitLab) Close(ctx context.Context, number int) error {
	_, _, err := g.c.MergeRequests.UpdateMergeRequest(g.project, int64(number), &gitlab.UpdateMergeRequestOptions{StateEvent: gitlab.Ptr("close")}, gitlab.WithContext(ctx))
	return err
}

func (g *gitLab) Comment(ctx context.Context, number int, marker, body string) (string, error) {
	// Project and group access tokens are bot users of their own: the
	// current user is the token's, whatever its kind.
	me, _, err := g.c.Users.CurrentUser(gitlab.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("gitlab %s: who the token is: %w", g.project, g.explained(err))
	}
	iid := int64(number)
	opts := &gitlab.ListMergeRequestNotesOptions{ListOptions: gitlab.ListOptions{PerPage: 100}}
	for page := 0; page < 50; page++ {
		notes, resp, err := g.c.Notes.ListMergeRequestNotes(g.project, iid, opts, gitlab.WithContext(ctx))
		if err != nil {
			return "", fmt.Errorf("gitlab %s: listing the notes of !%d: %w", g.project, number, g.explained(err))
		}
		for _, n := range notes {
			if n.Author.ID == me.ID && strings.HasPrefix(n.Body, marker) {
				if _, _, err := g.c.Notes.UpdateMergeRequestNote(g.project, iid, n.ID, &gitlab.UpdateMergeRequestNoteOptions{Body: &body}, gitlab.WithContext(ctx)); err != nil {
					return "", fmt.Errorf("gitlab %s: editing note %d of !%d: %w", g.project, n.ID, number, g.explained(err))
				}
				return g.noteURL(ctx, iid, n.ID), nil
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	n, _, err := g.c.Notes.CreateMergeRequestNote(g.project, iid, &gitlab.CreateMergeRequestNoteOptions{Body: &body}, gitlab.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("gitlab %s: commenting on !%d: %w", g.project, number, g.explained(err))
	}
	return g.noteURL(ctx, iid, n.ID), nil
}

// noteURL is where a merge request's note is shown.
func (g *gitLab) noteURL(ctx context.Context, iid, note int64) string {
	mr, _, err := g.c.MergeRequests.GetMergeRequest(g.project, iid, nil, gitlab.WithContext(ctx))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s#note_%d", mr.WebURL, note)
}

func (g *gitLab) Status(ctx context.Context, sha string, s Status) error {
	state := gitlab.BuildStateValue(s.State)
	if s.State == StateFailure || s.State == StateError {
		state = gitlab.Failed
	}
	o := &gitlab.SetCommitStatusOptions{State: state, Name: &s.Context, Description: gitlab.Ptr(s.description())}
	if s.TargetURL != "" {
		o.TargetURL = &s.TargetURL
	}
	if _, _, err := g.c.Commits.SetCommitStatus(g.project, sha, o, gitlab.WithContext(ctx)); err != nil {
		return fmt.Errorf("gitlab %s: setting the status of %s: %w", g.project, sha, g.explained(err))
	}
	return nil
}

// explained is an error of the GitLab client with what to grant, or when
// to come back.
func (g *gitLab) explained(err error) error {
	var e *gitlab.ErrorResponse
	if errors.As(err, &e) && e.Response != nil {
		return explain(v1alpha1.ForgeGitLab, e.Response.StatusCode, retryAfter(e.Response, time.Now()), err)
	}
	return err
}
