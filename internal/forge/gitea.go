package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
)

// gitea speaks Gitea's (and Forgejo's) REST API, /api/v1.
type gitea struct {
	root        string // https://host/api/v1
	api         string // https://host/api/v1/repos/OWNER/REPO
	c           Credentials
	http        *http.Client
	owner, repo string
}

func newGitea(u *url.URL, owner, repo string, c Credentials) *gitea {
	base := *u
	base.Path = ""
	root := strings.TrimSuffix(base.String(), "/") + "/api/v1"
	return &gitea{root: root, api: root + "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo),
		c: c, http: apiClient(), owner: owner, repo: repo}
}

type giteaPR struct {
	Number   int    `json:"number"`
	HTMLURL  string `json:"html_url"`
	State    string `json:"state"`
	Title    string `json:"title"`
	Body     string `json:"body"`
	Merged   bool   `json:"merged"`
	MergeSHA string `json:"merge_commit_sha"`
	Head     struct {
		Ref string `json:"ref"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

func (p giteaPR) out() *PullRequest {
	pr := &PullRequest{Number: p.Number, URL: p.HTMLURL, Title: p.Title, Body: p.Body, Head: p.Head.Ref, Base: p.Base.Ref, State: v1alpha1.PullRequestOpen}
	switch {
	case p.Merged:
		pr.State, pr.MergeCommit = v1alpha1.PullRequestMerged, p.MergeSHA
	case p.State == "closed":
		pr.State = v1alpha1.PullRequestClosed
	}
	return pr
}

func (g *gitea) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	target := g.api + path
	if strings.HasPrefix(path, "//") { // the API's root, not the repository's
		target = g.root + path[1:]
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if g.c.Username != "" && g.c.Username != "x-access-token" {
		req.SetBasicAuth(g.c.Username, g.c.Password)
	} else {
		req.Header.Set("Authorization", "token "+g.c.Password)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("gitea %s %s: %w", method, g.owner+"/"+g.repo+path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(data))
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		err := fmt.Errorf("gitea %s %s: %s: %s", method, target, resp.Status, msg)
		return explain(v1alpha1.ForgeGitea, resp.StatusCode, retryAfter(resp, time.Now()), err)
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (g *gitea) Find(ctx context.Context, head, base string) (*PullRequest, error) {
	var newest *giteaPR
	for page := 1; page <= 20; page++ {
		var prs []giteaPR
		if err := g.do(ctx, http.MethodGet, fmt.Sprintf("/pulls?state=all&sort=newest&limit=50&page=%d", page), nil, &prs); err != nil {
			return nil, err
		}
		for i := range prs {
			p := &prs[i]
			if p.Head.Ref == head && p.Base.Ref == base && (newest == nil || p.Number > newest.Number) {
				newest = p
			}
		}
		if newest != nil || len(prs) < 50 {
			break
		}
	}
	if newest == nil {
		return nil, nil
	}
	return newest.out(), nil
}

func (g *gitea) Open(ctx context.Context, n New) (*PullRequest, error) {
	title := n.Title
	if n.Draft && !strings.HasPrefix(title, "WIP:") {
		title = "WIP: " + title // Gitea's drafts are marked by their title
	}
	labels, err := g.labels(ctx, n.Labels)
	if err != nil {
		return nil, err
	}
	var p giteaPR
	if err := g.do(ctx, http.MethodPost, "/pulls", map[string]any{"head": n.Head, "base": n.Base, "title": title, "body": n.Body, "labels": labels}, &p); err != nil {
		return nil, err
	}
	if len(n.Reviewers) > 0 {
		if err := g.do(ctx, http.MethodPost, fmt.Sprintf("/pulls/%d/requested_reviewers", p.Number), map[string]any{"reviewers": n.Reviewers}, nil); err != nil {
			return p.out(), err
		}
	}
	if n.AutoMerge {
		err := g.do(ctx, http.MethodPost, fmt.Sprintf("/pulls/%d/merge", p.Number), map[string]any{"Do": "merge", "merge_when_checks_succeed": true}, nil)
		if err != nil {
			return p.out(), fmt.Errorf("asking for auto-merge: %w", err)
		}
	}
	return p.out(), nil
}

// labels are the ids of the named labels, made when missing.
func (g *gitea) labels(ctx context.Context, names []string) ([]int64, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var have []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	if err := g.do(ctx, http.MethodGet, "/labels?limit=100", nil, &have); err != nil {
		return nil, err
	}
	var ids []int64
	for _, n := range names {
		i := slices.IndexFunc(have, func(l struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		}) bool {
			return l.Name == n
		})
		if i >= 0 {
			ids = append(ids, have[i].ID)
			continue
		}
		var made struct {
			ID int64 `json:"id"`
		}
		if err := g.do(ctx, http.MethodPost, "/labels", map[string]any{"name": n, "color": "#0969da"}, &made); err != nil {
			return nil, err
		}
		ids = append(ids, made.ID)
	}
	return ids, nil
}

func (g *gitea) Edit(ctx context.Context, number int, title, body string) error {
	return g.do(ctx, http.MethodPatch, fmt.Sprintf("/pulls/%d", number), map[string]any{"title": title, "body": body}, nil)
}

func (g *gitea) Close(ctx context.Context, number int) error {
	return g.do(ctx, http.MethodPatch, fmt.Sprintf("/pulls/%d", number), map[string]any{"state": "closed"}, nil)
}

type giteaComment struct {
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	HTMLURL string `json:"html_url"`
	User    struct {
		Login string `json:"login"`
	} `json:"user"`
}

func (g *gitea) Comment(ctx context.Context, number int, marker, body string) (string, error) {
	var me struct {
		Login string `json:"login"`
	}
	if err := g.do(ctx, http.MethodGet, "//user", nil, &me); err != nil {
		return "", err
	}
	var comments []giteaComment
	if err := g.do(ctx, http.MethodGet, fmt.Sprintf("/issues/%d/comments", number), nil, &comments); err != nil {
		return "", err
	}
	for _, c := range comments {
		if c.User.Login == me.Login && strings.HasPrefix(c.Body, marker) {
			var edited giteaComment
			if err := g.do(ctx, http.MethodPatch, fmt.Sprintf("/issues/comments/%d", c.ID), map[string]string{"body": body}, &edited); err != nil {
				return "", err
			}
			return edited.HTMLURL, nil
		}
	}
	var made giteaComment
	if err := g.do(ctx, http.MethodPost, fmt.Sprintf("/issues/%d/comments", number), map[string]string{"body": body}, &made); err != nil {
		return "", err
	}
	return made.HTMLURL, nil
}

func (g *gitea) Status(ctx context.Context, sha string, s Status) error {
	return g.do(ctx, http.MethodPost, "/statuses/"+url.PathEscape(sha), map[string]string{
		"state": s.State, "context": s.Context, "description": s.description(), "target_url": s.TargetURL}, nil)
}
