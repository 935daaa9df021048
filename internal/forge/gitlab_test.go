package forge

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// No GitLab server runs here either: the adapter is held to GitLab's own
// description of its REST API (testdata/gitlab: the merge request and
// commit status operations verbatim from GitLab's OpenAPI description,
// the note and user operations from its REST API pages; README.md says
// which is which). Every request is validated against it; the answers
// are GitLab's documented example shapes.
const gitlabDescription = "testdata/gitlab/openapi.yaml"

// gitlabNote is a merge request note as doc/api/notes.md shows one.
func gitlabNote(id, author int, body string) map[string]any {
	return map[string]any{"id": id, "body": body, "attachment": nil,
		"author":     map[string]any{"id": author, "username": "pipin", "name": "Pip", "state": "active"},
		"created_at": "2013-10-02T08:57:14Z", "updated_at": "2013-10-02T08:57:14Z", "system": false,
		"noteable_id": 2, "noteable_type": "MergeRequest", "project_id": 5, "noteable_iid": 2,
		"resolvable": false, "confidential": false, "internal": false}
}

// gitlabMR is a merge request as doc/api/merge_requests.md shows one.
func gitlabMR(iid int, state string) map[string]any {
	return map[string]any{"id": 1, "iid": iid, "project_id": 3, "title": "Hydrate", "description": "what changed",
		"state": state, "source_branch": "sluice/pr/main", "target_branch": "main",
		"merge_commit_sha": nil, "squash_commit_sha": nil,
		"web_url": fmt.Sprintf("http://gitlab.example.com/acme/deploy/-/merge_requests/%d", iid)}
}

func gitlabServer(t *testing.T, token string, notes []map[string]any) (*testenv.OpenAPIServer, string) {
	t.Helper()
	// GitLab's description names whole paths (/api/v4/...) under its
	// server's root.
	srv := testenv.NewOpenAPIServer(t, gitlabDescription, "")
	srv.Auth = func(r *http.Request, op string) error {
		// Personal, project and group access tokens all go as
		// PRIVATE-TOKEN (or OAuth-style Bearer), as GitLab documents.
		if r.Header.Get("PRIVATE-TOKEN") == token || r.Header.Get("Authorization") == "Bearer "+token {
			return nil
		}
		return fmt.Errorf("no token GitLab gave (PRIVATE-TOKEN %q)", r.Header.Get("PRIVATE-TOKEN"))
	}
	srv.Answer = func(r *http.Request, op string) (int, any, bool) {
		if got := strings.SplitN(strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4/projects/"), "/", 2)[0]; strings.HasPrefix(r.URL.Path, "/api/v4/projects/") && got != "acme%2Fdeploy" {
			return http.StatusNotFound, map[string]string{"message": "404 Project Not Found: " + got}, true
		}
		switch op {
		case "getApiV4User":
			return 200, map[string]any{"id": 7, "username": "sluice-bot", "name": "Sluice", "state": "active", "bot": true}, true
		case "getApiV4Users":
			return 200, []any{map[string]any{"id": 11, "username": r.URL.Query().Get("username"), "name": "Reviewer", "state": "active"}}, true
		case "getApiV4ProjectsIdMergeRequestsNoteableIdNotes":
			return 200, notes, true
		case "postApiV4ProjectsIdMergeRequestsNoteableIdNotes":
			return 201, gitlabNote(302, 7, "new"), true
		case "putApiV4ProjectsIdMergeRequestsNoteableIdNotesNoteId":
			return 200, gitlabNote(301, 7, "edited"), true
		case "getApiV4ProjectsIdMergeRequests":
			return 200, []any{}, true
		case "postApiV4ProjectsIdMergeRequests":
			return 201, gitlabMR(9, "opened"), true
		case "getApiV4ProjectsIdMergeRequestsMergeRequestIid", "putApiV4ProjectsIdMergeRequestsMergeRequestIid", "putApiV4ProjectsIdMergeRequestsMergeRequestIidMerge":
			return 200, gitlabMR(9, "opened"), true
		case "postApiV4ProjectsIdStatusesSha":
			return 201, map[string]any{"id": 93, "sha": "18f3e63d05582537db6d183d9d557be09e1f90c8", "status": "success", "name": "sluice/preview"}, true
		}
		return 0, nil, false
	}
	return srv, srv.URL + "/acme/deploy.git"
}

func TestTheGitLabAdapterKeepsToGitLabsDescription(t *testing.T) {
	ctx := context.Background()
	mine := gitlabNote(301, 7, "<!-- sluice:preview -->\nold")
	others := gitlabNote(300, 8, "<!-- sluice:preview -->\nsomeone quoting it")
	srv, repo := gitlabServer(t, "glpat-t0ken", []map[string]any{others, mine})
	creds := Credentials{Username: "oauth2", Password: "glpat-t0ken"}

	// Deploy merge requests.
	f, err := For(v1alpha1.ForgeGitLab, repo, creds)
	if err != nil {
		t.Fatal(err)
	}
	if pr, err := f.Find(ctx, "sluice/pr/main", "main"); err != nil || pr != nil {
		t.Fatalf("find with none open: %v, %v", pr, err)
	}
	pr, err := f.Open(ctx, New{Head: "sluice/pr/main", Base: "main", Title: "Hydrate", Body: "what changed", Labels: []string{"sluice", "deploy"}, Reviewers: []string{"reviewer"}, Draft: true, AutoMerge: true})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 9 || !strings.HasSuffix(pr.URL, "/merge_requests/9") {
		t.Errorf("opened %+v", pr)
	}
	if err := f.Edit(ctx, pr.Number, "Hydrate again", "more"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx, pr.Number); err != nil {
		t.Fatal(err)
	}

	// Previews: the bot's own note is edited in place, not another's.
	r, err := ReviewerFor(v1alpha1.ForgeGitLab, repo, creds)
	if err != nil {
		t.Fatal(err)
	}
	url, err := r.Comment(ctx, 2, "<!-- sluice:preview -->", "<!-- sluice:preview -->\nnothing")
	if err != nil {
		t.Fatal(err)
	}
	if url != "http://gitlab.example.com/acme/deploy/-/merge_requests/9#note_301" {
		t.Errorf("the note is at %q", url)
	}
	for _, st := range []string{StatePending, StateSuccess, StateFailure, StateError} {
		if err := r.Status(ctx, "18f3e63d05582537db6d183d9d557be09e1f90c8", Status{Context: "sluice/preview", State: st, Description: "1 folder changes", TargetURL: "https://sluice.example.com/pr/1"}); err != nil {
			t.Fatalf("status %s: %v", st, err)
		}
	}
	srv.Check(t)
	want := []string{
		"getApiV4ProjectsIdMergeRequests", "postApiV4ProjectsIdMergeRequests", "getApiV4Users",
		"putApiV4ProjectsIdMergeRequestsMergeRequestIid", "putApiV4ProjectsIdMergeRequestsMergeRequestIidMerge",
		"putApiV4ProjectsIdMergeRequestsMergeRequestIid", "putApiV4ProjectsIdMergeRequestsMergeRequestIid",
		"getApiV4User", "getApiV4ProjectsIdMergeRequestsNoteableIdNotes", "putApiV4ProjectsIdMergeRequestsNoteableIdNotesNoteId",
		"getApiV4ProjectsIdMergeRequestsMergeRequestIid",
		"postApiV4ProjectsIdStatusesSha", "postApiV4ProjectsIdStatusesSha", "postApiV4ProjectsIdStatusesSha", "postApiV4ProjectsIdStatusesSha",
	}
	if got := srv.Calls(); !slices.Equal(got, want) {
		t.Errorf("called\n%q\nwant\n%q", got, want)
	}

	// With no note of its own it adds one.
	srv2, repo2 := gitlabServer(t, "glpat-t0ken", []map[string]any{others})
	r2, _ := ReviewerFor(v1alpha1.ForgeGitLab, repo2, creds)
	if _, err := r2.Comment(ctx, 2, "<!-- sluice:preview -->", "<!-- sluice:preview -->\nnothing"); err != nil {
		t.Fatal(err)
	}
	srv2.Check(t)
	if got := srv2.Calls(); !slices.Contains(got, "postApiV4ProjectsIdMergeRequestsNoteableIdNotes") || slices.Contains(got, "putApiV4ProjectsIdMergeRequestsNoteableIdNotesNoteId") {
		t.Errorf("with another's note only: called %q", got)
	}
}

// What the description refuses, the test refuses: a status of a state
// GitLab does not know, a note past GitLab's limit, a token GitLab never
// gave.
func TestARequestThatBreaksGitLabsDescriptionFails(t *testing.T) {
	ctx := context.Background()
	srv, repo := gitlabServer(t, "glpat-t0ken", nil)
	r, _ := ReviewerFor(v1alpha1.ForgeGitLab, repo, Credentials{Password: "glpat-t0ken"})
	err := r.Status(ctx, "18f3e63d05582537db6d183d9d557be09e1f90c8", Status{Context: "sluice/preview", State: "done"})
	if f := srv.Failures(); err == nil || len(f) != 1 || !strings.Contains(f[0], "state") {
		t.Fatalf("a state of %q: err %v, failures %q", "done", err, f)
	}
	_, err = r.Comment(ctx, 2, "<!-- sluice:preview -->", strings.Repeat("x", 1_000_001))
	if f := srv.Failures(); err == nil || len(f) != 2 || !strings.Contains(f[1], "body") {
		t.Fatalf("a note of 1,000,001 characters: err %v, failures %q", err, f)
	}
	r, _ = ReviewerFor(v1alpha1.ForgeGitLab, repo, Credentials{Password: "stolen"})
	if err := r.Status(ctx, "18f3e63d05582537db6d183d9d557be09e1f90c8", Status{Context: "sluice/preview", State: StateSuccess}); err == nil {
		t.Error("a wrong token was taken")
	}
}

// A request body with a key the description does not name fails.
func TestAKeyGitLabsDescriptionDoesNotNameFails(t *testing.T) {
	srv, _ := gitlabServer(t, "glpat-t0ken", nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v4/projects/acme%2Fdeploy/merge_requests/2/notes", strings.NewReader(`{"body": "x", "bodyy": "y"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("PRIVATE-TOKEN", "glpat-t0ken")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f := srv.Failures(); resp.StatusCode != http.StatusUnprocessableEntity || len(f) != 1 || !strings.Contains(f[0], "bodyy") {
		t.Errorf("answered %d, failures %q", resp.StatusCode, f)
	}
}
