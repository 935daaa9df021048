package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/hydrate"
)

type hydrateFlags struct {
	engine   engineFlags
	files    []string
	syncs    []string
	dryRun   bool
	force    bool
	out      string
	output   string
	parallel int
}

func newHydrateCmd(s Streams, g *globalFlags) *cobra.Command {
	f := &hydrateFlags{}
	cmd := &cobra.Command{
		Use:   "hydrate -f PATH...",
		Short: "Render ManifestSyncs into their destination branches",
		Long: `Render every ManifestSync found in the given files and directories, pin
their images to digests, and commit each folder into its destination branch.
Syncs whose inputs and digests did not change are skipped without rendering.

Exit codes: 0 success (with --dry-run: nothing would change), 1 a sync
failed (with --dry-run: something would change), 2 invalid input or error.`,
		Example: `  sluice hydrate -f syncs/
  sluice hydrate -f syncs/ --dry-run
  sluice hydrate -f syncs/ --sync guestbook-dev -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files) == 0 {
				return exit(2, errors.New("-f is required: the files or directories holding ManifestSyncs"))
			}
			if f.output != "text" && f.output != "json" {
				return exit(2, fmt.Errorf("-o %s: must be text or json", f.output))
			}
			o, err := f.options(s, g)
			if err != nil {
				return exit(2, err)
			}
			report, err := hydrate.RunFiles(cmd.Context(), f.files, f.syncs, o)
			if err != nil {
				return exit(2, err)
			}
			return f.print(s, report)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file or directory of ManifestSyncs (repeatable)")
	fl.StringArrayVar(&f.syncs, "sync", nil, "hydrate only the ManifestSync of this name (repeatable)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would change as a diff; write nothing")
	fl.BoolVar(&f.force, "force", false, "render and write even the syncs that look unchanged")
	fl.StringVar(&f.out, "out", "", "write the folders under this directory (DIR/BRANCH/PATH) instead of git")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.IntVar(&f.parallel, "parallel", 0, "syncs rendered at once (default: the number of CPUs)")
	f.engine.addCache(fl)
	return cmd
}

func (f *hydrateFlags) options(s Streams, g *globalFlags) (hydrate.Options, error) {
	_, _, o, err := f.engine.engines(s)
	if err != nil {
		return o, err
	}
	o.Force, o.DryRun, o.OutDir, o.Parallel = f.force, f.dryRun, f.out, f.parallel
	o.Log = slog.Default()
	if f.output == "text" && (isTerminal(s.Err) || g.verbose) {
		o.Progress = func(r hydrate.Result) { fmt.Fprintln(s.Err, progressLine(r)) }
	}
	return o, nil
}

func progressLine(r hydrate.Result) string {
	switch r.Result {
	case hydrate.Failed:
		return fmt.Sprintf("✗ %s failed: %s", r.Name, r.Error)
	case hydrate.Committed:
		return fmt.Sprintf("✓ %s committed %s → %s", r.Name, shortSHA(r.Commit), r.Destination)
	case hydrate.Changed:
		return fmt.Sprintf("~ %s changed → %s", r.Name, r.Destination)
	case hydrate.Locked:
		return lockedLine(r)
	}
	return fmt.Sprintf("= %s unchanged", r.Name)
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

func (f *hydrateFlags) print(s Streams, report *hydrate.Report) error {
	if f.output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report.Results); err != nil {
			return err
		}
	} else {
		for _, r := range report.Results {
			if r.Diff != "" {
				fmt.Fprint(s.Out, r.Diff)
			}
			if r.Result == hydrate.Failed && !isTerminal(s.Err) {
				fmt.Fprintf(s.Err, "✗ %s failed: %s\n", r.Name, r.Error)
			}
			if r.Result == hydrate.Locked && !isTerminal(s.Err) {
				fmt.Fprintln(s.Err, lockedLine(r))
			}
		}
	}
	if err := report.Err(); err != nil {
		if f.dryRun {
			return exit(2, err)
		}
		return exit(1, err)
	}
	if f.dryRun && report.Changed() {
		var names []string
		for _, r := range report.Results {
			if r.Result == hydrate.Changed {
				names = append(names, r.Name)
			}
		}
		return exit(1, fmt.Errorf("would change: %s", strings.Join(names, ", ")))
	}
	return nil
}

func lockedLine(r hydrate.Result) string {
	line := fmt.Sprintf("⊘ %s skipped: %s is taken over by %s until %s", r.Name, r.Destination, r.Lock.Owner, r.Lock.Expires)
	if r.Lock.Tag != "" {
		line += " (deployment tag " + r.Lock.Tag + ")"
	}
	return line
}
