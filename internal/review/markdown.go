package review

import (
	"fmt"
	"html"
	"strings"
)

// Marker opens every comment Sluice writes on a pull request: how it
// finds its own comment again, to edit it rather than add one.
const Marker = "<!-- sluice:preview -->"

// Comment limits of the forges, in characters: a longer comment is
// refused.
const (
	GitHubLimit = 65536
	GitLabLimit = 1000000
	GiteaLimit  = 65535
)

// Format tunes Markdown.
type Format struct {
	// Limit is the most characters the Markdown may have (the forge's
	// comment limit); 0: no limit.
	Limit int
	// More says where to read what a cut leaves out: the dashboard's
	// page of the pull request, the command that prints it all.
	More string
}

// maxError is the most of one render error a comment shows.
const maxError = 600

// Markdown is the report as a pull request comment: the summary, a table
// per destination branch (each sync reached, its folder, the objects
// added, changed and removed, the images pinned anew, or its render
// error), then each folder's diff, collapsed; within f.Limit, cut where
// it must with where to read the rest.
func (r *Report) Markdown(f Format) string {
	var head strings.Builder
	if r.Unmergeable == "" && len(r.Syncs) == 0 {
		return r.nothing(f)
	}
	head.WriteString(Marker + "\n")
	fmt.Fprintf(&head, "### Sluice: %s\n\n", r.Summary())
	if r.Unmergeable != "" {
		fmt.Fprintf(&head, "The head (%s) cannot be merged onto %s (%s): %s\n", code(r.Head), code(r.Base), short(r.BaseCommit), mdEscape(r.Unmergeable))
		return cut(head.String(), f)
	}
	fmt.Fprintf(&head, "%s merged onto %s at %s.", short(r.HeadCommit), code(r.Base), short(r.BaseCommit))
	fmt.Fprintf(&head, " %d of the %d syncs that follow it read what this changes.\n", len(r.Syncs), r.Following)

	var tables strings.Builder
	var errs strings.Builder
	group := ""
	for _, s := range r.Syncs {
		if g := s.Repo + "\x00" + s.Branch; g != group {
			group = g
			fmt.Fprintf(&tables, "\n**%s** of %s\n\n", mdEscape(s.Branch), mdEscape(s.Repo))
			tables.WriteString("| | Sync | Folder | Added | Changed | Removed | Images pinned anew |\n|---|---|---|--:|--:|--:|--:|\n")
		}
		mark, counts := "➖", "| 0 | 0 | 0 | 0 |"
		switch {
		case s.Error != "":
			mark, counts = "❌", "| | | | |"
			msg := s.Error
			if len(msg) > maxError {
				msg = msg[:maxError] + "…"
			}
			fmt.Fprintf(&errs, "- **%s** (%s): %s\n", mdEscape(s.Name), code(s.Path), code(oneLine(msg)))
		case s.Changed():
			mark = "✏️"
			c := s.Changes
			if c != nil {
				counts = fmt.Sprintf("| %d | %d | %d | %d |", len(c.Added), len(c.Changed), len(c.Removed), len(c.Repinned))
			} else {
				counts = "| | | | |"
			}
		}
		fmt.Fprintf(&tables, "| %s | %s | %s %s\n", mark, mdEscape(s.Name), code(strings.ReplaceAll(s.Path, "|", "\\|")), counts)
	}
	if errs.Len() > 0 {
		tables.WriteString("\nRenders that fail:\n\n" + errs.String())
	}
	for _, n := range r.Notes {
		tables.WriteString("\n> " + mdEscape(n) + "\n")
	}
	top := head.String() + tables.String()
	footer := ""
	if f.More != "" {
		footer = "\n" + f.More + "\n"
	}
	if f.Limit > 0 && len(top)+len(footer) > f.Limit {
		return cut(top, f)
	}

	var b strings.Builder
	b.WriteString(top)
	budget := f.Limit - len(top) - len(footer) - 200
	left, truncated := 0, false
	for _, s := range r.Syncs {
		if s.Diff == "" {
			continue
		}
		if f.Limit > 0 && budget < 400 {
			left++
			continue
		}
		open := fmt.Sprintf("\n<details><summary>%s: <code>%s</code> on %s</summary>\n\n", html.EscapeString(s.Name), html.EscapeString(s.Path), html.EscapeString(s.Branch))
		fence := fenceFor(s.Diff)
		closeTag := fence + "\n\n</details>\n"
		diff := s.Diff
		note := ""
		if f.Limit > 0 && len(open)+len(fence)+len("diff\n")+len(diff)+len(closeTag) > budget {
			room := budget - len(open) - len(fence) - len("diff\n") - len(closeTag) - 80
			diff, note = cutLines(diff, room)
		}
		truncated = truncated || note != "" || s.DiffCut
		block := open + fence + "diff\n" + diff + closeTag + note
		b.WriteString(block)
		budget -= len(block)
	}
	if left > 0 {
		fmt.Fprintf(&b, "\nThe diffs of %d more folders do not fit in a comment.\n", left)
	}
	if (truncated || left > 0) && footer != "" {
		b.WriteString(footer)
	}
	return b.String()
}

// nothing is the one line of a change that reaches no folder.
func (r *Report) nothing(f Format) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n**Sluice**: nothing deployable changes: ", Marker)
	switch r.Following {
	case 0:
		fmt.Fprintf(&b, "no sync follows %s", code(r.Base))
	case 1:
		fmt.Fprintf(&b, "the one sync that follows %s reads nothing this changes", code(r.Base))
	default:
		fmt.Fprintf(&b, "none of the %d syncs that follow %s reads what this changes", r.Following, code(r.Base))
	}
	fmt.Fprintf(&b, " (%s onto %s).\n", short(r.HeadCommit), short(r.BaseCommit))
	return cut(b.String(), f)
}

// cut keeps Markdown within the limit, at a line's end.
func cut(s string, f Format) string {
	more := ""
	if f.More != "" {
		more = "\n" + f.More + "\n"
	}
	if f.Limit <= 0 || len(s) <= f.Limit {
		return s
	}
	keep, _ := cutLines(s, f.Limit-len(more)-80)
	return keep + "\n… cut at the comment limit." + more
}

// cutLines keeps the whole lines of s that fit in n characters, and says
// how many lines it left out.
func cutLines(s string, n int) (string, string) {
	if len(s) <= n {
		return s, ""
	}
	if n < 0 {
		n = 0
	}
	i := strings.LastIndexByte(s[:n], '\n')
	keep := s[:i+1]
	left := strings.Count(s[i+1:], "\n")
	if !strings.HasSuffix(s, "\n") {
		left++
	}
	return keep, fmt.Sprintf("\n%d more lines of this diff are not shown.\n", left)
}

// fenceFor is a code fence longer than any run of backticks in s.
func fenceFor(s string) string {
	longest, run := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// code is s as inline code, whatever backticks it holds.
func code(s string) string {
	if s == "" {
		return "`.`"
	}
	f := strings.Repeat("`", len(fenceFor(s))-2)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return f + " " + s + " " + f
	}
	return f + s + f
}

// mdEscape keeps text from being read as Markdown or HTML.
func mdEscape(s string) string {
	r := strings.NewReplacer("\\", "\\\\", "|", "\\|", "*", "\\*", "_", "\\_", "`", "\\`", "[", "\\[", "]", "\\]", "<", "&lt;", ">", "&gt;", "\n", " ")
	return r.Replace(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func short(sha string) string {
	if len(sha) > 7 {
		return "`" + sha[:7] + "`"
	}
	return "`" + sha + "`"
}
