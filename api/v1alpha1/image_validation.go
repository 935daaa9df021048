package v1alpha1

import (
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks an Image.
func (i *Image) Validate() field.ErrorList {
	errs := validateName(i.Name, field.NewPath("metadata", "name"))
	s, p := i.Spec, field.NewPath("spec")
	switch {
	case s.Image == "":
		errs = append(errs, field.Required(p.Child("image"), "the repository to push to, without a tag"))
	case hasTag(s.Image) || strings.Contains(s.Image, "@"):
		errs = append(errs, field.Invalid(p.Child("image"), s.Image, "a repository without tag or digest: tags go in spec.tags"))
	}
	if s.Base == "" {
		errs = append(errs, field.Required(p.Child("base"), `the image to build on ("scratch" for none)`))
	}
	if len(s.Source) == 0 {
		errs = append(errs, field.Required(p.Child("source"), "where the image's files come from"))
	}
	for j, src := range s.Source {
		sp := p.Child("source").Index(j)
		errs = append(errs, Source{Repo: src.Repo, Ref: src.Ref}.validate(sp)...)
		if len(src.Mappings) == 0 && s.Builder == nil {
			errs = append(errs, field.Required(sp.Child("mappings"), "the files to copy into the image"))
		}
		for k, m := range src.Mappings {
			errs = append(errs, m.validate(sp.Child("mappings").Index(k))...)
		}
	}
	for j, t := range s.Tags {
		if t == TagSourceCommit {
			continue
		}
		if err := ValidateTag(t); err != nil {
			errs = append(errs, field.Invalid(p.Child("tags").Index(j), t, err.Error()))
		}
	}
	if b := s.Builder; b != nil && len(b.Command) == 0 {
		errs = append(errs, field.Required(p.Child("builder", "command"), "the build command"))
	}
	return errs
}

func (m Mapping) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case m.Src == "":
		errs = append(errs, field.Required(p.Child("src"), "a file or glob in the source"))
	case path.IsAbs(m.Src) || m.Src == ".." || strings.HasPrefix(m.Src, "../") || strings.Contains(m.Src, "/../") || strings.HasSuffix(m.Src, "/.."):
		errs = append(errs, field.Invalid(p.Child("src"), m.Src, "must stay inside the source's root: no absolute path, no .."))
	case !doublestar.ValidatePattern(m.Src):
		errs = append(errs, field.Invalid(p.Child("src"), m.Src, "not a valid glob"))
	}
	switch {
	case m.Dest == "" || !path.IsAbs(m.Dest):
		errs = append(errs, field.Invalid(p.Child("dest"), m.Dest, "must be an absolute path in the image"))
	case slices.Contains(strings.Split(m.Dest, "/"), ".."):
		errs = append(errs, field.Invalid(p.Child("dest"), m.Dest, "must not hold .. (write the path it means)"))
	}
	if m.Strip != "" && (path.IsAbs(m.Strip) || strings.Contains(m.Strip, "..")) {
		errs = append(errs, field.Invalid(p.Child("strip"), m.Strip, "a relative prefix of src"))
	}
	return errs
}
