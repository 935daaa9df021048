package hydrate

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/secrets"
)

// diffFolders is a unified diff from the old folder to the new one, file
// by file, as `git diff` would show it, with no Secret's value in it
// (see redactSecrets) and every value in values masked.
func diffFolders(dir string, old, cur destination.Folder, manifestsOnly bool, limit int, keys map[string]map[string]secrets.KeyChange, values *mask.Set) (diff string, cut bool) {
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
		if a == c || manifestsOnly && (n == v1alpha1.ProvenanceFile || n == v1alpha1.SourceIgnoreFile) {
			continue
		}
		from, to := "a/"+path.Join(dir, n), "b/"+path.Join(dir, n)
		if _, ok := old[n]; !ok {
			from = "/dev/null"
		}
		if _, ok := cur[n]; !ok {
			to = "/dev/null"
		}
		a, c = redactSecrets(a, c, keys)
		text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(a), B: difflib.SplitLines(c),
			FromFile: from, ToFile: to, Context: 3,
		})
		// Masked before it is cut: a value cut at the limit is still
		// known whole.
		text = values.String(text)
		if limit > 0 && b.Len()+len(text) > limit {
			// Kept to the limit, at a line's end: what is left is
			// counted, not held.
			room := max(limit-b.Len(), 0)
			keep := text[:room]
			if i := strings.LastIndexByte(keep, '\n'); i >= 0 {
				keep = keep[:i+1]
			} else {
				keep = ""
			}
			b.WriteString(keep)
			fmt.Fprintf(&b, "... %d more lines of the diff of %s are left out (the diff is cut at %d bytes)\n", strings.Count(text[len(keep):], "\n"), dir, limit)
			return b.String(), true
		}
		b.WriteString(text)
	}
	return b.String(), false
}

// What a Secret's value shows as in a diff: never the value, nor anything
// that could be compared with another (a digest). The old side's values
// are hidden; the new side's say what became of them.
const (
	hiddenValue    = "<hidden>"
	changedValue   = "<changed>"
	addedValue     = "<added>"
	mayHaveChanged = "<may have changed>"
)

// redactSecrets hides the values of the Secrets the old and new text of
// a file hold, readable or encrypted, wherever they sit: each becomes
// what became of it (keys, from the new folder's sealing, says so for
// encrypted ones; readable ones are compared here), and a Secret's SOPS
// metadata becomes one line. A file that holds no Secret stays as it is;
// one that does not parse is not shown.
func redactSecrets(old, cur string, keys map[string]map[string]secrets.KeyChange) (string, string) {
	if !mayHoldSecret(old) && !mayHoldSecret(cur) {
		return old, cur
	}
	a, aerr := parseFile(old)
	b, berr := parseFile(cur)
	if aerr != nil || berr != nil {
		const unparsed = "(a file that does not parse as YAML, not shown)\n"
		return unparsed, unparsed
	}
	before := map[string]map[string]string{} // Secret → field.key → value
	for _, o := range a {
		if secrets.IsSecret(o) {
			before[secretID(o)] = secrets.Values(o)
		}
	}
	for _, o := range a {
		hideSecret(o, func(string, string) string { return hiddenValue })
	}
	for _, o := range b {
		id := secretID(o)
		was, existed := before[id]
		hideSecret(o, func(key, value string) string {
			prev, had := was[key]
			switch {
			case !existed || !had:
				return addedValue
			case !isEncrypted(prev) && !isEncrypted(value):
				if prev == value {
					return hiddenValue
				}
				return changedValue
			}
			switch keys[id][key] {
			case secrets.Unchanged:
				return hiddenValue
			case secrets.Changed:
				return changedValue
			case secrets.Added:
				return addedValue
			}
			return mayHaveChanged
		})
	}
	return joinObjects(a), joinObjects(b)
}

// mayHoldSecret is a quick look: a text without the word holds none.
func mayHoldSecret(file string) bool {
	return strings.Contains(file, "Secret") || strings.Contains(file, "!!binary")
}

func parseFile(text string) ([]*yaml.RNode, error) {
	if text == "" {
		return nil, nil
	}
	return kio.FromBytes([]byte(text))
}

func secretID(o *yaml.RNode) string { return o.GetNamespace() + "/" + o.GetName() }

// hideSecret replaces the values of o, if it is a Secret, with what show
// says of each ("data.KEY", value), and its SOPS metadata with a line.
func hideSecret(o *yaml.RNode, show func(key, value string) string) {
	if !secrets.IsSecret(o) {
		return
	}
	for _, field := range []string{"data", "stringData"} {
		m := o.Field(field)
		if m == nil || m.Value == nil {
			continue
		}
		_ = m.Value.VisitFields(func(f *yaml.MapNode) error {
			v := f.Value.YNode()
			v.Value = show(field+"."+f.Key.YNode().Value, v.Value)
			v.Style, v.Tag, v.Kind, v.Content = 0, "!!str", yaml.ScalarNode, nil
			return nil
		})
	}
	if o.Field("sops") != nil {
		_ = o.PipeE(yaml.SetField("sops", yaml.NewScalarRNode("<SOPS metadata>")))
	}
}

// isEncrypted reports whether a value is SOPS's.
func isEncrypted(v string) bool { return strings.HasPrefix(v, "ENC[") }

func joinObjects(objs []*yaml.RNode) string {
	var b strings.Builder
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(o.MustString())
	}
	return b.String()
}
