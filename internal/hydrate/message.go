package hydrate

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"sluice.dev/sluice/api/v1alpha1"
)

// commitMessage says what a commit holds: for each sync, the source
// repo@commit and the images whose pin changed; a Sluice-Sync trailer per
// sync, so `git log --grep` finds a sync's history.
// The syncs are listed by namespace and name, whatever order they were
// planned in (the controller's reconciles come in any order): the same
// change gives the same message.
func commitMessage(plans []*plan) string {
	plans = slices.Clone(plans)
	slices.SortFunc(plans, func(a, b *plan) int {
		return cmp.Or(cmp.Compare(a.ms.Namespace, b.ms.Namespace), cmp.Compare(a.ms.Name, b.ms.Name))
	})
	var b strings.Builder
	if len(plans) == 1 {
		p := plans[0]
		fmt.Fprintf(&b, "hydrate %s from %s\n\n", p.ms.Name, sourceLine(p.prov.Source))
	} else {
		names := make([]string, len(plans))
		for i, p := range plans {
			names[i] = p.ms.Name
		}
		subject := strings.Join(names, ", ")
		if len(subject) > 60 {
			subject = fmt.Sprintf("%s and %d more", names[0], len(names)-1)
		}
		fmt.Fprintf(&b, "hydrate %d syncs: %s\n\n", len(plans), subject)
	}
	for _, p := range plans {
		if len(plans) > 1 {
			fmt.Fprintf(&b, "%s: %s\n", p.ms.Name, sourceLine(p.prov.Source))
		}
		fmt.Fprintf(&b, "  into %s\n", p.dstPath)
		if t := p.prov.Takeover; t != nil {
			fmt.Fprintf(&b, "  taken over by %s until %s", t.Owner, t.Expires)
			if t.Tag != "" {
				fmt.Fprintf(&b, " (deployment tag %s)", t.Tag)
			}
			b.WriteString("\n")
		}
		for _, c := range imageChanges(p.prev, p.prov) {
			fmt.Fprintf(&b, "  image %s\n", c)
		}
	}
	b.WriteString("\n")
	for _, p := range plans {
		fmt.Fprintf(&b, "Sluice-Sync: %s\n", p.ms.Name)
	}
	return b.String()
}

func sourceLine(s v1alpha1.ProvenanceSource) string {
	line := s.Repo
	if s.Commit != "" {
		line += "@" + short(s.Commit)
	}
	if s.Dirty {
		line += " (uncommitted changes)"
	}
	if s.Path != "." {
		line += " " + s.Path
	}
	return line
}

// imageChanges lists the images pinned differently than before.
func imageChanges(prev, cur *v1alpha1.Provenance) []string {
	old := map[string]v1alpha1.PinnedImage{}
	if prev != nil {
		for _, i := range prev.Images {
			old[i.From] = i
		}
	}
	var out []string
	for _, i := range cur.Images {
		o, ok := old[i.From]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s:%s → %s", i.Name, i.Tag, shortDigest(i.Digest)))
		case o.Tag != i.Tag || o.Digest != i.Digest:
			out = append(out, fmt.Sprintf("%s:%s %s → :%s %s", i.Name, o.Tag, shortDigest(o.Digest), i.Tag, shortDigest(i.Digest)))
		}
	}
	sort.Strings(out)
	return out
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
