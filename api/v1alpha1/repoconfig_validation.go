package v1alpha1

import (
	"github.com/bmatcuk/doublestar/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a RepoConfig.
func (r *RepoConfig) Validate() field.ErrorList {
	errs := validateName(r.Name, field.NewPath("metadata", "name"))
	s, p := r.Spec, field.NewPath("spec")
	errs = append(errs, Source{Repo: s.Repo, Ref: s.Ref}.validate(p)...)
	if len(s.Globs) == 0 {
		errs = append(errs, field.Required(p.Child("globs"), `the files to search for resources, such as "deploy/**/*.yaml"`))
	}
	for i, g := range s.Globs {
		if !doublestar.ValidatePattern(g) {
			errs = append(errs, field.Invalid(p.Child("globs").Index(i), g, "not a valid glob"))
		}
	}
	for i := range s.Selectors {
		if _, err := metav1.LabelSelectorAsSelector(&s.Selectors[i]); err != nil {
			errs = append(errs, field.Invalid(p.Child("selectors").Index(i), s.Selectors[i].String(), err.Error()))
		}
	}
	errs = append(errs, s.Overrides.Validate(p.Child("overrides"))...)
	return errs
}

// Validate checks overrides.
func (o Overrides) Validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range o.Repos {
		rp := p.Child("repos").Index(i)
		if r.From == "" {
			errs = append(errs, field.Required(rp.Child("from"), "the repository to replace"))
		}
		if r.To == "" {
			errs = append(errs, field.Required(rp.Child("to"), "what to read instead: a URL, URL?ref=BRANCH, or a local path"))
		}
	}
	for i, img := range o.Images {
		ip := p.Child("images").Index(i)
		if img.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), "an image repository or glob"))
		}
		if err := ValidateTag(img.Tag); err != nil {
			errs = append(errs, field.Invalid(ip.Child("tag"), img.Tag, err.Error()))
		}
	}
	return errs
}
