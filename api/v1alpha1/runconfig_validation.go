package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a RunConfig.
func (r *RunConfig) Validate() field.ErrorList {
	errs := validateName(r.Name, field.NewPath("metadata", "name"))
	s, p := r.Spec, field.NewPath("spec")
	if s.Mode != RunModeReplace && s.Mode != RunModeVersion {
		errs = append(errs, field.NotSupported(p.Child("mode"), s.Mode, []string{RunModeReplace, RunModeVersion}))
	}
	if s.Pause != RunPauseObject && s.Pause != RunPauseOwner {
		errs = append(errs, field.NotSupported(p.Child("pause"), s.Pause, []string{RunPauseObject, RunPauseOwner}))
	}
	if s.Session != "" {
		for _, msg := range validation.IsDNS1123Label(s.Session) {
			errs = append(errs, field.Invalid(p.Child("session"), s.Session, msg))
		}
	}
	if s.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(s.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), s.Namespace, msg))
		}
	}
	if s.HelmRelease != "" {
		ns, name, ok := strings.Cut(s.HelmRelease, "/")
		if !ok || ns == "" || name == "" {
			errs = append(errs, field.Invalid(p.Child("helmRelease"), s.HelmRelease, "must be NAMESPACE/NAME"))
		}
	}
	if s.Ref != "" && s.Repo == "" {
		errs = append(errs, field.Required(p.Child("repo"), "ref names a branch of repo"))
	}
	if s.Ref != "" {
		if err := ValidateRefName(s.Ref); err != nil {
			errs = append(errs, field.Invalid(p.Child("ref"), s.Ref, err.Error()))
		}
	}
	if s.Poll != nil && s.Repo == "" {
		errs = append(errs, field.Invalid(p.Child("poll"), s.Poll.Duration.String(), "polls the checkout of repo: set repo"))
	}
	if s.Poll != nil && s.Poll.Duration < 0 || s.ReadyTimeout != nil && s.ReadyTimeout.Duration < 0 {
		errs = append(errs, field.Invalid(p, "", "durations must not be negative"))
	}
	if s.HandoffFile != "" && !s.Handoff {
		errs = append(errs, field.Invalid(p.Child("handoffFile"), s.HandoffFile, "is written only with handoff: true"))
	}
	if s.Handoff && s.Mode == RunModeVersion {
		errs = append(errs, field.Invalid(p.Child("handoff"), true, "hands over a replace session's objects: version mode keeps its own namespaces"))
	}
	return errs
}
