package controller

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"sluice.dev/sluice/api/v1alpha1"
)

// GitHub's pull request events, as GitHub's published description has
// their payloads (internal/forge/testdata/github): a payload made of each
// event's schema (every field it requires), with the fields a preview
// reads set, valid against the schema, is read as a preview of the pull
// request's ref at its head; a fork's is untrusted; closing asks for
// nothing.
func TestGitHubsPullRequestEventsAsItsDescriptionHasThem(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromFile("../forge/testdata/github/api.github.com.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		schema, action string
		fork           bool
		ignored        string
	}{
		{"webhook-pull-request-opened", "opened", false, ""},
		{"webhook-pull-request-synchronize", "synchronize", true, ""},
		{"webhook-pull-request-reopened", "reopened", false, ""},
		{"webhook-pull-request-closed", "closed", false, "pull request action closed"},
	} {
		t.Run(c.action, func(t *testing.T) {
			s := doc.Components.Schemas[c.schema].Value
			payload := fill(s, 0).(map[string]any)
			payload["action"] = c.action
			payload["number"] = 42
			pr := payload["pull_request"].(map[string]any)
			pr["number"] = 42
			head, base := pr["head"].(map[string]any), pr["base"].(map[string]any)
			head["sha"] = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
			base["ref"] = "main"
			setRepo(base, "acme/web")
			setRepo(payload["repository"].(map[string]any), "acme/web")
			if c.fork {
				setRepo(head, "mallory/web")
			} else {
				setRepo(head, "acme/web")
			}
			// Valid as GitHub describes it: the test reads what GitHub sends.
			data, _ := json.Marshal(payload)
			var generic any
			json.Unmarshal(data, &generic)
			if err := s.VisitJSON(generic); err != nil {
				t.Fatalf("the payload breaks GitHub's schema %s: %v", c.schema, err)
			}
			ev, ignored, err := parsePullRequest("github", "pull_request", data)
			if err != nil {
				t.Fatal(err)
			}
			if ignored != c.ignored {
				t.Fatalf("ignored %q, want %q", ignored, c.ignored)
			}
			if ignored != "" {
				return
			}
			want := pullRequestEvent{Forge: v1alpha1.ForgeGitHub, Number: 42, Base: "main", Ref: "refs/pull/42/head", Head: "6dcb09b5b57875f334f61aebed695e2e4193db5e",
				Fork: c.fork, Action: c.action}
			got := ev
			got.Repos = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read %+v, want %+v", got, want)
			}
			if len(ev.Repos) == 0 || ev.Repos[0] != repository("https://github.com/acme/web.git") {
				t.Errorf("repositories %q", ev.Repos)
			}
		})
	}
}

func setRepo(obj map[string]any, fullName string) {
	repo, ok := obj["repo"].(map[string]any)
	if !ok {
		repo = obj // the event's own repository
	}
	repo["full_name"] = fullName
	repo["clone_url"] = "https://github.com/" + fullName + ".git"
	repo["html_url"] = "https://github.com/" + fullName
	repo["ssh_url"] = "git@github.com:" + fullName + ".git"
}

// fill makes a value a schema takes: each required property, filled in
// turn; the first of oneOf and anyOf; an enum's first value.
func fill(s *openapi3.Schema, depth int) any {
	if depth > 40 {
		return nil
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	if len(s.AllOf) > 0 {
		out := map[string]any{}
		for _, sub := range s.AllOf {
			if m, ok := fill(sub.Value, depth+1).(map[string]any); ok {
				for k, v := range m {
					out[k] = v
				}
			}
		}
		return out
	}
	for _, alts := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		if len(alts) > 0 {
			return fill(alts[0].Value, depth+1)
		}
	}
	switch {
	case s.Type.Is("object") || s.Properties != nil:
		out := map[string]any{}
		for _, name := range s.Required {
			if p := s.Properties[name]; p != nil {
				out[name] = fill(p.Value, depth+1)
			}
		}
		return out
	case s.Type.Is("array"):
		return []any{}
	case s.Type.Is("integer"), s.Type.Is("number"):
		return 1
	case s.Type.Is("boolean"):
		return false
	case s.Type.Is("string"):
		switch s.Format {
		case "date-time":
			return "2027-01-15T08:00:00Z"
		case "uri", "uri-template":
			return "https://github.com/acme/web"
		case "email":
			return "octocat@github.com"
		}
		return strings.Repeat("x", int(max(s.MinLength, 1)))
	}
	if s.Nullable {
		return nil
	}
	return "x"
}

// GitLab's merge request event as GitLab publishes its example
// (testdata/gitlab): opened and reopened are previewed, at the
// merge request's ref and its last commit; an update previews only with
// oldrev (new commits, as the page documents: a title's edit has none);
// closing and merging ask for nothing.
func TestGitLabsMergeRequestEventAsItsDocumentationHasIt(t *testing.T) {
	data, err := os.ReadFile("testdata/gitlab/merge_request_event.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action, oldrev, ignored string
	}{
		{"open", "", ""},
		{"reopen", "", ""},
		{"update", "", "merge request action update"},
		{"update", "ae73cb07c9eeaf35924a10f713b364d32b2dd34f", ""},
		{"close", "", "merge request action close"},
		{"merge", "", "merge request action merge"},
	} {
		var p map[string]any
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		attrs := p["object_attributes"].(map[string]any)
		attrs["action"] = c.action
		if c.oldrev != "" {
			attrs["oldrev"] = c.oldrev
		}
		body, _ := json.Marshal(p)
		ev, ignored, err := parsePullRequest("gitlab", "Merge Request Hook", body)
		if err != nil {
			t.Fatalf("%s: %v", c.action, err)
		}
		if ignored != c.ignored {
			t.Errorf("%s (oldrev %q): ignored %q, want %q", c.action, c.oldrev, ignored, c.ignored)
			continue
		}
		if ignored != "" {
			continue
		}
		want := pullRequestEvent{Forge: v1alpha1.ForgeGitLab, Number: 1, Base: "master", Ref: "refs/merge-requests/1/head",
			Head: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", Fork: false, Action: c.action}
		got := ev
		got.Repos = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %+v, want %+v", c.action, got, want)
		}
		if !slices.Contains(ev.Repos, repository("http://example.com/gitlabhq/gitlab-test.git")) {
			t.Errorf("%s: repositories %q", c.action, ev.Repos)
		}
	}
}
