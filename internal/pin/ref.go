package pin

import (
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"sluice.dev/sluice/api/v1alpha1"
)

// Ref is an image reference split as written.
type Ref struct {
	Repo   string
	Tag    string
	Digest string
}

// ParseRef splits "repo[:tag][@digest]"; a colon before the last slash is a
// registry port, not a tag.
func ParseRef(s string) Ref {
	var r Ref
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s, r.Digest = s[:i], s[i+1:]
	}
	slash := strings.LastIndex(s, "/")
	if i := strings.LastIndex(s, ":"); i > slash {
		s, r.Tag = s[:i], s[i+1:]
	}
	r.Repo = s
	return r
}

// String writes the reference back.
func (r Ref) String() string {
	s := r.Repo
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// names are the forms a repository is matched by: as written, and
// normalized ("nginx" is also "docker.io/library/nginx").
func names(repo string) []string {
	out := []string{repo}
	if r, err := name.NewRepository(repo); err == nil {
		full := r.Name()
		out = append(out, full)
		if after, ok := strings.CutPrefix(full, name.DefaultRegistry+"/"); ok {
			out = append(out, "docker.io/"+after)
		}
	}
	return out
}

// Match returns the first rule whose name matches the repository: exactly,
// after normalization, or as a glob ("*" alone matches every repository).
func Match(rules []v1alpha1.ImageRule, repo string) (v1alpha1.ImageRule, bool) {
	if i := matchIndex(rules, repo); i >= 0 {
		return rules[i], true
	}
	return v1alpha1.ImageRule{}, false
}

// MatchName reports whether an image name pattern (exact, normalized, or a
// glob; "*" alone matches all) matches the repository.
func MatchName(pattern, repo string) bool {
	return matchIndex([]v1alpha1.ImageRule{{Name: pattern}}, repo) == 0
}

func matchIndex(rules []v1alpha1.ImageRule, repo string) int {
	forms := names(repo)
	for i, rule := range rules {
		if rule.Name == "*" {
			return i
		}
		ruleForms := names(rule.Name)
		for _, f := range forms {
			for _, rf := range ruleForms {
				if rf == f {
					return i
				}
			}
			if ok, _ := path.Match(rule.Name, f); ok {
				return i
			}
		}
	}
	return -1
}
