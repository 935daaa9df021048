package hydrate

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/destination"
)

// diffFolders is a unified diff from the old folder to the new one, file
// by file, as `git diff` would show it, with no Secret's value in it
// (see redact).
func diffFolders(dir string, old, cur destination.Folder, manifestsOnly bool, limit int) (diff string, cut bool) {
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
	salt := make([]byte, 16)
	rand.Read(salt)
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
		text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(redact(a, salt)), B: difflib.SplitLines(redact(c, salt)),
			FromFile: from, ToFile: to, Context: 3,
		})
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

// redact hides the values of the Secrets a file holds, readable or
// encrypted: each value becomes a digest of it under salt (one per diff,
// then forgotten), so that a diff shows which keys changed and nothing of
// what they hold, and a Secret's SOPS metadata becomes one line. A file
// holding no Secret is left as it is.
func redact(file string, salt []byte) string {
	if !strings.Contains(file, "Secret") {
		return file
	}
	objs, err := kio.FromBytes([]byte(file))
	if err != nil {
		return "(a file that does not parse as YAML, not shown)\n"
	}
	found := false
	for _, o := range objs {
		if o.GetKind() != "Secret" {
			continue
		}
		found = true
		for _, field := range []string{"data", "stringData"} {
			m := o.Field(field)
			if m == nil || m.Value == nil {
				continue
			}
			_ = m.Value.VisitFields(func(f *yaml.MapNode) error {
				h := sha256.New()
				h.Write(salt)
				h.Write([]byte(f.Value.YNode().Value))
				f.Value.YNode().Value = "<hidden: " + hex.EncodeToString(h.Sum(nil)[:6]) + ">"
				f.Value.YNode().Style = 0
				return nil
			})
		}
		if o.Field("sops") != nil {
			_ = o.PipeE(yaml.SetField("sops", yaml.NewScalarRNode("<SOPS metadata>")))
		}
	}
	if !found {
		return file
	}
	var b strings.Builder
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(o.MustString())
	}
	return b.String()
}
