package review

import (
	"context"
	"fmt"

	"sluice.dev/sluice/internal/forge"
)

// StatusContext names the commit status a preview sets: what branch
// protection requires.
const StatusContext = "sluice/preview"

// Pending sets the head's status to pending while a preview runs.
func Pending(ctx context.Context, r forge.Reviewer, sha, targetURL string) error {
	return r.Status(ctx, sha, forge.Status{Context: StatusContext, State: forge.StatePending, Description: "rendering the folders this changes", TargetURL: targetURL})
}

// Publish posts a report on pull request number: its comment (the one
// Sluice keeps there, edited in place) and the status of the head
// previewed, failing where a render fails or the head cannot be merged.
// It returns the comment's URL.
func Publish(ctx context.Context, r forge.Reviewer, number int, rep *Report, f Format, targetURL string) (string, error) {
	url, err := r.Comment(ctx, number, Marker, rep.Markdown(f))
	if err != nil {
		return "", fmt.Errorf("commenting on pull request %d: %w", number, err)
	}
	if rep.HeadCommit == "" {
		return url, nil
	}
	state := forge.StateSuccess
	if rep.Failed() {
		state = forge.StateFailure
	}
	if targetURL == "" {
		targetURL = url
	}
	if err := r.Status(ctx, rep.HeadCommit, forge.Status{Context: StatusContext, State: state, Description: rep.Summary(), TargetURL: targetURL}); err != nil {
		return url, fmt.Errorf("setting the status of %s: %w", rep.HeadCommit, err)
	}
	return url, nil
}
