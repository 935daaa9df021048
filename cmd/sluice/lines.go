package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"sluice.dev/sluice/internal/hydrate"
)

// style says how result lines look: on a terminal, with a symbol and
// colour (unless NO_COLOR is set); elsewhere (a CI log, a pipe) plain
// words, the same lines in the same order.
type style struct{ symbols, color bool }

func styleFor(w io.Writer) style {
	t := isTerminal(w)
	return style{symbols: t, color: t && os.Getenv("NO_COLOR") == ""}
}

// ANSI colours of the results.
const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	dim    = "\x1b[2m"
	cyan   = "\x1b[36m"
	reset  = "\x1b[0m"
)

func (st style) mark(symbol, color, line string) string {
	if st.symbols {
		line = symbol + " " + line
	}
	if st.color {
		line = color + line + reset
	}
	return line
}

// syncLine is one sync's result: its name, what became of it, the
// destination commit and folder, as kubectl prints one line per object.
func (st style) syncLine(r hydrate.Result) string {
	line := st.resultLine(r)
	if pr := r.PullRequest; pr != nil && r.Result != hydrate.Failed {
		line += fmt.Sprintf(" (pull request #%d %s: %s)", pr.Number, pr.State, pr.URL)
	}
	return line
}

func (st style) resultLine(r hydrate.Result) string {
	switch r.Result {
	case hydrate.Failed:
		return st.mark("✗", red, fmt.Sprintf("%s failed: %s", r.Name, r.Error))
	case hydrate.Committed:
		return st.mark("✓", green, fmt.Sprintf("%s committed %s → %s", r.Name, shortSHA(r.Commit), r.Destination))
	case hydrate.Changed:
		return st.mark("~", yellow, fmt.Sprintf("%s changed → %s", r.Name, r.Destination))
	case hydrate.Locked:
		line := fmt.Sprintf("%s skipped: %s is taken over by %s until %s", r.Name, r.Destination, r.Lock.Owner, r.Lock.Expires)
		if r.Lock.Tag != "" {
			line += " (deployment tag " + r.Lock.Tag + ")"
		}
		return st.mark("⊘", cyan, line)
	}
	at := ""
	if r.Commit != "" {
		at = " at " + shortSHA(r.Commit)
	}
	return st.mark("=", dim, fmt.Sprintf("%s unchanged%s → %s", r.Name, at, r.Destination))
}

// printSync writes a sync's line: failures to stderr, the rest to stdout.
func printSync(s Streams, r hydrate.Result) {
	if r.Result == hydrate.Failed {
		fmt.Fprintln(s.Err, styleFor(s.Err).syncLine(r))
		return
	}
	st := styleFor(s.Out)
	fmt.Fprintln(s.Out, st.syncLine(r))
	if r.Result != hydrate.Changed && r.Result != hydrate.Committed {
		return
	}
	// What the deployer will not do as Helm does, and what the chart
	// generated (never a value): said where the folder is written or
	// would be.
	for _, w := range r.Warnings {
		fmt.Fprintln(s.Out, st.mark(" !", yellow, "  "+r.Name+": "+w))
	}
	for _, g := range r.Generated {
		fmt.Fprintf(s.Out, "  %s: %s generates values (%s), derived from the sync key\n", r.Name, g.Template, strings.Join(g.Functions, ", "))
	}
	for _, l := range r.Lookups {
		fmt.Fprintf(s.Out, "  %s: %s calls lookup, rendered as on a first install (it finds nothing)\n", r.Name, l)
	}
}

// shortSHA is a commit's short name, or an artifact digest's (an OCI
// destination's "commit"): sha256: and 12 hex digits.
func shortSHA(s string) string {
	if strings.HasPrefix(s, "sha256:") {
		return shortDigestOf(s)
	}
	if len(s) > 7 {
		return s[:7]
	}
	return s
}
