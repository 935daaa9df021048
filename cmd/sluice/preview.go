package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/review"
)

type previewFlags struct {
	engine     engineFlags
	files      []string
	syncs      []string
	repo       string
	base       string
	head       string
	headCommit string
	untrusted  bool
	output     string
	limit      int
	more       string
	pull       int
	forge      string
	targetURL  string
}

func newPreviewCmd(s Streams) *cobra.Command {
	f := &previewFlags{}
	cmd := &cobra.Command{
		Use:   "preview -f PATH... --base BRANCH --head REF",
		Short: "Show what a source change (a pull request) would change in every deploy folder, as Markdown",
		Long: `Merge HEAD onto the branch BASE of the source repository the syncs read, as
the forge would merge the pull request; render, as a dry run of
` + "`sluice hydrate`" + `, every ManifestSync that follows BASE and reads a file the
change touches; and print, as Markdown for a pull request comment, what
each folder would get: objects added, changed and removed, images pinned
anew, render errors, and the diffs. No Secret's value is printed, and
nothing is written anywhere.

HEAD is a branch, a commit SHA the repository's branches hold, or the
ref a forge keeps for a pull request (refs/pull/N/head on GitHub and
Gitea, refs/merge-requests/N/head on GitLab), which reaches a fork's.

With --pull N the preview is also posted on pull request N: one comment
Sluice keeps there, edited at each run, and the commit status
sluice/preview on the head, failing when a render fails, which branch
protection can require.

Exit codes: 0 nothing deployable changes, 1 some folder changes, 2 a
render fails, the head cannot be merged, posting failed, or invalid
input.`,
		Example: `  sluice preview -f syncs/ --base main --head feature
  sluice preview -f syncs/ --base main --head refs/pull/42/head --untrusted --limit 65536
  SLUICE_GIT_TOKEN=$TOKEN sluice preview -f syncs/ --base main --head refs/pull/42/head --pull 42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files) == 0 {
				return exit(2, errors.New("-f is required: the files or directories holding ManifestSyncs"))
			}
			if f.base == "" || f.head == "" {
				return exit(2, errors.New("--base and --head are required: the branch the change merges into, and what it merges"))
			}
			if f.output != "markdown" && f.output != "json" {
				return exit(2, fmt.Errorf("-o %s: must be markdown or json", f.output))
			}
			_, _, ho, err := f.engine.engines(s)
			if err != nil {
				return exit(2, err)
			}
			defer closeSandbox(ho.Sandbox)
			ho.Log = slog.Default()
			ch := review.Change{Repo: f.repo, Base: f.base, Head: f.head, HeadCommit: f.headCommit}
			format := review.Format{Limit: f.limit, More: f.more}
			o := review.Options{Hydrate: ho, Untrusted: f.untrusted, DiffLimit: 2 * f.limit}
			if f.pull > 0 {
				o.Post = &review.Post{Forge: f.forge, Number: f.pull, Format: format, TargetURL: f.targetURL}
				if o.Post.Format.Limit == 0 {
					o.Post.Format.Limit = review.GitHubLimit // the smallest of the forges'
					o.DiffLimit = 2 * review.GitHubLimit
				}
			}
			rep, err := review.RunFiles(cmd.Context(), f.files, f.syncs, ch, o)
			if rep == nil && err != nil {
				return exit(2, err)
			}
			if f.output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				fmt.Fprint(s.Out, rep.Markdown(format))
			}
			switch {
			case err != nil:
				return exit(2, err) // printed, not posted
			case rep.Failed():
				return exit(2, errors.New(rep.Summary()))
			case rep.Changed():
				return exit(1, nil)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file or directory of ManifestSyncs (repeatable)")
	fl.StringArrayVar(&f.syncs, "sync", nil, "preview only the ManifestSync of this name (repeatable)")
	fl.StringVar(&f.repo, "repo", "", "the source repository the change is to (default: the one the syncs read)")
	fl.StringVar(&f.base, "base", "", "the branch the change merges into")
	fl.StringVar(&f.head, "head", "", "what merges: a branch, a commit SHA, or a pull request's ref (refs/pull/N/head, refs/merge-requests/N/head)")
	fl.StringVar(&f.headCommit, "head-commit", "", "the commit the head must be at (the SHA the forge reported)")
	fl.BoolVar(&f.untrusted, "untrusted", false, "the change comes from outside (a fork): generated values derive from a throwaway key, never the sync key")
	fl.StringVarP(&f.output, "output", "o", "markdown", "output format: markdown or json")
	fl.IntVar(&f.limit, "limit", 0, "the most characters of Markdown, cut at a line with where to read the rest (GitHub comments: 65536; 0: no limit)")
	fl.IntVar(&f.pull, "pull", 0, "post the preview on this pull (merge) request of the source repository: one comment, edited at each run, and the commit status "+review.StatusContext+" on its head (the API token: $SLUICE_GIT_TOKEN)")
	fl.StringVar(&f.forge, "forge", "", "the source repository's forge for --pull: github, gitlab or gitea (default: told from the host)")
	fl.StringVar(&f.targetURL, "target-url", "", "what the commit status links to (a CI job's page; default: the comment)")
	fl.StringVar(&f.more, "more", "", "where to read what a cut leaves out (a CI job's log), said where the Markdown is cut")
	f.engine.addCache(fl)
	fl.StringVar(&f.engine.syncKey, "sync-key", "", "the sync key file (default: $SLUICE_SYNC_KEY); without one, generated values derive from a throwaway key and show as changed")
	return cmd
}
