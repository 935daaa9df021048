package hydrate

import (
	"path"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"sluice.dev/sluice/internal/destination"
)

// diffFolders is a unified diff from the old folder to the new one, file
// by file, as `git diff` would show it.
func diffFolders(dir string, old, cur destination.Folder) string {
	names := map[string]bool{}
	for n := range old {
		names[n] = true
	}
	for n := range cur {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for _, n := range sorted {
		a, c := string(old[n]), string(cur[n])
		if a == c {
			continue
		}
		from, to := "a/"+path.Join(dir, n), "b/"+path.Join(dir, n)
		if _, ok := old[n]; !ok {
			from = "/dev/null"
		}
		if _, ok := cur[n]; !ok {
			to = "/dev/null"
		}
		text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(a), B: difflib.SplitLines(c),
			FromFile: from, ToFile: to, Context: 3,
		})
		b.WriteString(text)
	}
	return b.String()
}
