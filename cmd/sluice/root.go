package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Streams are the command's standard streams.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// exitError carries an exit code other than 1 up to Run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exit returns an error that makes Run exit with code, printing err (if
// any) first.
func exit(code int, err error) error { return &exitError{code: code, err: err} }

// globalFlags are the flags every command has.
type globalFlags struct {
	verbose bool
}

// usageError is a command line the command cannot run: an unknown
// command or flag, a wrong number of arguments. It exits 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitCodes are the codes Run returns and what each says (the
// reference lists them).
var exitCodes = []struct {
	code    int
	meaning string
}{
	{0, "success"},
	{1, "what the command did failed, or, where the command says so, it found a difference (`sluice diff`)"},
	{2, "the input was wrong or the command could not run: an unknown command or flag, a wrong number of arguments, a file, flag value or resource that is not what it must be"},
}

// Run runs the sluice command line and returns the exit code: 0 success,
// 1 what the command did failed (or, where the command says so, found a
// difference), 2 the input was wrong or the command could not run. The
// code is decided by the error's type, never by its text.
func Run(ctx context.Context, s Streams, args []string) int {
	root := newRootCmd(s)
	root.SetArgs(args)
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	var ue *usageError
	switch {
	case errors.As(err, &ee):
		code = ee.code
		err = ee.err
	case errors.As(err, &ue):
		code = 2
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(s.Err, "error:", line)
		}
	}
	return code
}

// strict makes every command's argument and flag errors usage errors.
func strict(cmd *cobra.Command) {
	if validate := cmd.Args; validate != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := validate(c, args); err != nil {
				return &usageError{fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		strict(sub)
	}
}

func newRootCmd(s Streams) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "sluice",
		Short: "The machinery between GitOps source repositories and Flux or Argo CD",
		Long: `Sluice renders kustomize overlays, Helm charts and plain YAML into plain
manifests, pins every image to a digest, and commits the result into the
folder of a destination branch that Flux or Argo CD syncs from (hydrate,
apply -f for RepoConfigs). It builds images without Docker (build), lets a
developer point the same configuration at a branch or working tree for a
while (takeover), applies to a cluster (apply, diff), and runs live
sessions that put the cluster back and hand it to GitOps when they end
(run).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(s.Err, &slog.HandlerOptions{Level: level})))
		},
	}
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "print progress and debug logs to stderr")
	root.AddCommand(newHydrateCmd(s, g), newRenderCmd(s), newApplyCmd(s), newDiffCmd(s), newRunCmd(s), newBuildCmd(s), newTakeoverCmd(s), newDevCmd(s), newServeCmd(s), newDashboardCmd(s), newSyncKeyCmd(s), newPreviewCmd(s), newVersionCmd(s))
	// The root runs only to say a command is unknown (cobra would return
	// that as a plain error) or, with no command, to print its help.
	root.Args = cobra.ArbitraryArgs
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if sug := cmd.SuggestionsFor(args[0]); len(sug) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", sug[0])
		}
		return &usageError{errors.New(msg)}
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())}
	})
	for _, sub := range root.Commands() {
		strict(sub)
	}
	return root
}
