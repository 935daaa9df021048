package v1alpha1

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateName checks metadata.name: required, a DNS-1123 label.
func validateName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "every Sluice resource needs a name")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// validateRelPath checks a slash-separated path that must stay inside its
// root: not absolute and without "..".
func validateRelPath(p string, fp *field.Path) field.ErrorList {
	switch {
	case path.IsAbs(p) || strings.HasPrefix(p, `\`):
		return field.ErrorList{field.Invalid(fp, p, "must be a relative path")}
	case p == ".." || strings.HasPrefix(p, "../"):
		return field.ErrorList{field.Invalid(fp, p, "must not leave its root with ..")}
	}
	if p == "" || p == "." {
		return nil
	}
	if err := ValidateGitPath(p); err != nil {
		return field.ErrorList{field.Invalid(fp, p, err.Error())}
	}
	return nil
}

// ValidateGitPath checks a slash-separated path as git checks the paths
// of a tree it checks out or receives (with fsckObjects): no empty, "."
// or ".." element, no .git folder under any name a file system takes for
// it (".GIT", ".git." and "git~1" on Windows, ".g\u200cit" on macOS), and
// none of the characters Windows cannot hold in a name.
func ValidateGitPath(p string) error {
	for _, part := range strings.Split(p, "/") {
		if why := gitRefuses(part); why != "" {
			return fmt.Errorf("%q: %s", part, why)
		}
	}
	return nil
}

func gitRefuses(part string) string {
	switch part {
	case "":
		return "an empty path element"
	case ".", "..":
		return "a path element git refuses"
	}
	for _, r := range part {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`\:*?"<>|`, r) {
			return fmt.Sprintf("holds %q, which git refuses on Windows checkouts", r)
		}
	}
	// What HFS+ ignores, and NTFS's trailing dots and spaces, do not make a
	// name other than .git to those file systems.
	folded := strings.Map(func(r rune) rune {
		switch {
		case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
			return -1
		}
		return r
	}, part)
	folded = strings.TrimRight(folded, ". ")
	if strings.EqualFold(folded, ".git") || strings.EqualFold(folded, "git~1") {
		return "names the repository's own .git folder on some file system; git refuses it"
	}
	return ""
}

// ValidateRefName checks a git branch or tag name as `git check-ref-format`
// would, so a bad name fails at validation rather than at push.
func ValidateRefName(ref string) error {
	switch {
	case ref == "":
		return fmt.Errorf("must not be empty")
	case strings.HasPrefix(ref, "/") || strings.HasSuffix(ref, "/") || strings.Contains(ref, "//"):
		return fmt.Errorf("must not begin or end with / or contain //")
	case strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock"):
		return fmt.Errorf("must not end with . or .lock")
	case strings.Contains(ref, "..") || strings.Contains(ref, "@{"):
		return fmt.Errorf("must not contain .. or @{")
	case ref == "@" || ref == "HEAD":
		return fmt.Errorf("must name a branch, not %s", ref)
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Errorf("must not contain %q", r)
		}
	}
	for _, part := range strings.Split(ref, "/") {
		if strings.HasPrefix(part, ".") {
			return fmt.Errorf("no component may begin with .")
		}
	}
	return nil
}

// tagPattern is the OCI distribution spec's tag grammar.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// ValidateTag checks an image tag against the OCI distribution grammar.
func ValidateTag(tag string) error {
	if !tagPattern.MatchString(tag) {
		return fmt.Errorf("%q is not a valid image tag: up to 128 letters, digits, _, . and -, not starting with . or -", tag)
	}
	return nil
}

// validateSemverConstraint checks a semver range.
func validateSemverConstraint(c string, fp *field.Path) field.ErrorList {
	if _, err := semver.NewConstraint(c); err != nil {
		return field.ErrorList{field.Invalid(fp, c, err.Error())}
	}
	return nil
}
