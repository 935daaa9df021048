package main

import (
	"errors"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/hydrate"
)

func TestSyncLinesAreWordsInLogsAndSymbolsOnTerminals(t *testing.T) {
	dst := "https://git.example.com/deploy.git env/dev apps/web"
	results := []hydrate.Result{
		{Name: "web", Result: hydrate.Committed, Commit: "3f2a1b9c0d", Destination: dst},
		{Name: "web", Result: hydrate.Unchanged, Commit: "3f2a1b9c0d", Destination: dst},
		{Name: "web", Result: hydrate.Changed, Destination: dst},
		{Name: "web", Result: hydrate.Failed, Error: "rendering: boom", Err: errors.New("boom")},
		{Name: "web", Result: hydrate.Locked, Destination: dst, Lock: &v1alpha1.Takeover{Owner: "alice", Expires: "2026-12-03T10:00:00Z", Tag: "dev-alice"}},
		{Name: "web", Result: hydrate.Committed, Commit: "3f2a1b9c0d", Destination: dst, PullRequest: &v1alpha1.PullRequestStatus{Number: 7, State: "open", URL: "https://gitea.example.com/team/deploy/pulls/7"}},
	}
	tests := []struct {
		st   style
		want []string
	}{
		{style{}, []string{
			"web committed 3f2a1b9 → " + dst,
			"web unchanged at 3f2a1b9 → " + dst,
			"web changed → " + dst,
			"web failed: rendering: boom",
			"web skipped: " + dst + " is taken over by alice until 2026-12-03T10:00:00Z (deployment tag dev-alice)",
			"web committed 3f2a1b9 → " + dst + " (pull request #7 open: https://gitea.example.com/team/deploy/pulls/7)",
		}},
		{style{symbols: true}, []string{"✓ web committed 3f2a1b9 → " + dst}},
		{style{symbols: true, color: true}, []string{green + "✓ web committed 3f2a1b9 → " + dst + reset}},
	}
	for _, tt := range tests {
		for i, want := range tt.want {
			if got := tt.st.syncLine(results[i]); got != want {
				t.Errorf("%+v: %q, want %q", tt.st, got, want)
			}
		}
	}
	t.Setenv("NO_COLOR", "1")
	if st := styleFor(nil); st.color || st.symbols {
		t.Errorf("not a terminal: %+v", st)
	}
}
