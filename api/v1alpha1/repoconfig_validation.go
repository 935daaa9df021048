package v1alpha1

import (
	"net/url"
	"strings"

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
	errs = append(errs, s.Credentials.validate(p.Child("credentials"))...)
	return errs
}

// validate checks what a RepoConfig lends.
func (c FoundCredentials) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range c.Git {
		gp := p.Child("git").Index(i)
		u, err := url.Parse(g.URL)
		switch {
		case g.URL == "":
			errs = append(errs, field.Required(gp.Child("url"), `where the Secret is sent: "https://git.example.com"`))
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh"):
			errs = append(errs, field.Invalid(gp.Child("url"), g.URL, "an https://, http:// or ssh:// URL naming the host (and port)"))
		case u.User != nil:
			errs = append(errs, field.Invalid(gp.Child("url"), g.URL, "credentials belong in the Secret, not the URL"))
		}
		if g.SecretRef.Name == "" {
			errs = append(errs, field.Required(gp.Child("secretRef", "name"), "the Secret lent"))
		}
	}
	for i, r := range c.Registries {
		rp := p.Child("registries").Index(i)
		if r.Host == "" || strings.ContainsAny(r.Host, "/ ") {
			errs = append(errs, field.Invalid(rp.Child("host"), r.Host, `a registry host ("registry.example.com", "host:5000")`))
		}
		if r.SecretRef.Name == "" {
			errs = append(errs, field.Required(rp.Child("secretRef", "name"), "the Secret lent"))
		}
	}
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
