package forge

import "context"

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
