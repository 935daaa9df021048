package dashboard

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"sluice.dev/sluice/internal/source"
)

// esc escapes text for SVG.
var esc = template.HTMLEscapeString

// timeline draws the commits that changed a folder along a time axis,
// oldest left; each dot is a link to the commit where the git host is
// known, with its details as a tooltip. The list beside it says the same
// in text.
func timeline(commits []source.LogEntry, repo string) template.HTML {
	if len(commits) == 0 {
		return ""
	}
	const w, h, pad = 900, 70, 40
	first, last := commits[len(commits)-1].When, commits[0].When
	span := last.Sub(first)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return w / 2
		}
		return pad + float64(t.Sub(first))/float64(span)*(w-2*pad)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%d commits changed this folder between %s and %s">`,
		w, h, len(commits), esc(first.UTC().Format(time.DateTime)), esc(last.UTC().Format(time.DateTime)))
	fmt.Fprintf(&b, `<line class="lane" x1="%d" y1="30" x2="%d" y2="30" stroke-width="2"/>`, pad, w-pad)
	for i := len(commits) - 1; i >= 0; i-- {
		c := commits[i]
		title := fmt.Sprintf("%s %s — %s, %s", short(c.Hash), c.Subject, c.Author, c.When.UTC().Format(time.DateTime))
		dot := fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="30" r="6"><title>%s</title></circle>`, x(c.When), esc(title))
		if u := commitURL(repo, c.Hash); u != "" {
			dot = fmt.Sprintf(`<a href="%s">%s</a>`, esc(u), dot)
		}
		b.WriteString(dot)
	}
	fmt.Fprintf(&b, `<text class="muted" x="%d" y="58">%s</text>`, pad, esc(first.UTC().Format(time.DateTime)))
	fmt.Fprintf(&b, `<text class="muted" x="%d" y="58" text-anchor="end">%s</text>`, w-pad, esc(last.UTC().Format(time.DateTime)))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// chain draws a sync's way from source to cluster: the source commit, the
// destination commit it was rendered into, and the digests each image was
// pinned to.
func chain(r syncRow) template.HTML {
	const bw, bh, gap = 250, 46, 60
	n := max(1, len(r.Images))
	h := max(bh+20, n*(bh+10)+10)
	w := 3*bw + 2*gap + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="graph" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="source %s at %s, rendered into %s at %s, %d images pinned">`,
		w, h, esc(r.Source.Repo), esc(short(r.Source.Commit)), esc(r.Destination.Ref+" "+r.Destination.Path), esc(short(r.Destination.Commit)), len(r.Images))
	node := func(x, y int, class, head, body, link string) {
		g := fmt.Sprintf(`<rect class="node %s" x="%d" y="%d" width="%d" height="%d" rx="6"/>`+
			`<text x="%d" y="%d" class="muted">%s</text><text x="%d" y="%d">%s</text>`,
			class, x, y, bw, bh, x+10, y+18, esc(clip(head, 36)), x+10, y+36, esc(clip(body, 36)))
		if link != "" {
			g = fmt.Sprintf(`<a href="%s">%s</a>`, esc(link), g)
		}
		b.WriteString(g)
	}
	mid := h/2 - bh/2
	class := "node-ok"
	if r.State == StateFailed || r.State == StateStalled {
		class = "node-bad"
	}
	node(10, mid, "", "source "+r.Source.Ref, repoName(r.Source.Repo)+" @ "+short(r.Source.Commit), r.Source.URL)
	node(10+bw+gap, mid, class, "rendered into "+r.Destination.Ref, r.Destination.Path+" @ "+short(r.Destination.Commit), r.Destination.URL)
	fmt.Fprintf(&b, `<path class="edge" d="M%d %d H%d" stroke-width="2" marker-end="url(#arrow)"/>`, 10+bw, h/2, 10+bw+gap-4)
	for i, img := range r.Images {
		y := 10 + i*(bh+10)
		x0, x1 := 10+2*bw+gap, 10+2*(bw+gap)
		fmt.Fprintf(&b, `<path class="edge" d="M%d %d C%d %d %d %d %d %d" stroke-width="2" marker-end="url(#arrow)"/>`, x0, h/2, x0+gap/2, h/2, x0+gap/2, y+bh/2, x1-4, y+bh/2)
		node(x1, y, "", img.Name+": "+img.From+":"+img.Tag, img.Digest, "")
	}
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path class="edge" d="M0 0 L10 5 L0 10"/></marker></defs>`)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func short(s string) string {
	s = strings.TrimPrefix(s, "sha256:")
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// repoName is the last two parts of a repository URL.
func repoName(repo string) string {
	repo = strings.TrimSuffix(strings.TrimSuffix(repo, "/"), ".git")
	parts := strings.Split(repo, "/")
	if len(parts) >= 2 {
		return parts[len(parts)-2] + "/" + parts[len(parts)-1]
	}
	return repo
}

// lanes draws a destination branch's commits along a time axis, a lane
// per sync folder: a dot where a commit changed the folder, a line joining
// the dots of one commit.
func lanes(commits []source.LogEntry, syncs []syncRow, repo string) template.HTML {
	if len(commits) == 0 {
		return ""
	}
	const w, label, pad, laneH = 1000, 220, 30, 28
	h := len(syncs)*laneH + 50
	lane := map[string]int{}
	for i, s := range syncs {
		lane[s.Destination.Path] = i
	}
	first, last := commits[len(commits)-1].When, commits[0].When
	span := last.Sub(first)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return float64(label+w) / 2
		}
		return label + float64(t.Sub(first))/float64(span)*float64(w-label-pad)
	}
	y := func(i int) int { return 20 + i*laneH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline lanes" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%d commits to this branch between %s and %s, by sync folder">`,
		w, h, len(commits), esc(first.UTC().Format(time.DateTime)), esc(last.UTC().Format(time.DateTime)))
	for i, s := range syncs {
		fmt.Fprintf(&b, `<text x="0" y="%d">%s</text><line class="lane" x1="%d" y1="%d" x2="%d" y2="%d"/>`,
			y(i)+4, esc(clip(s.Namespace+"/"+s.Name, 30)), label, y(i), w-pad, y(i))
	}
	for i := len(commits) - 1; i >= 0; i-- {
		c := commits[i]
		cx := x(c.When)
		var ys []int
		for _, f := range c.Folders {
			if l, ok := lane[f]; ok {
				ys = append(ys, y(l))
			}
		}
		if len(ys) == 0 {
			continue
		}
		title := fmt.Sprintf("%s %s — %s, %s", short(c.Hash), c.Subject, c.Author, c.When.UTC().Format(time.DateTime))
		var g strings.Builder
		if len(ys) > 1 {
			fmt.Fprintf(&g, `<line class="edge" x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke-width="2"/>`, cx, slices.Min(ys), cx, slices.Max(ys))
		}
		for _, yy := range ys {
			fmt.Fprintf(&g, `<circle class="dot" cx="%.1f" cy="%d" r="6"/>`, cx, yy)
		}
		group := fmt.Sprintf(`<g data-commit="%s"><title>%s</title>%s</g>`, esc(c.Hash), esc(title), g.String())
		if u := commitURL(repo, c.Hash); u != "" {
			group = fmt.Sprintf(`<a href="%s">%s</a>`, esc(u), group)
		}
		b.WriteString(group)
	}
	fmt.Fprintf(&b, `<text class="muted" x="%d" y="%d">%s</text>`, label, h-8, esc(first.UTC().Format(time.DateTime)))
	fmt.Fprintf(&b, `<text class="muted" x="%d" y="%d" text-anchor="end">%s</text>`, w-pad, h-8, esc(last.UTC().Format(time.DateTime)))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
