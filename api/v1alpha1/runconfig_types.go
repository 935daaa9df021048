package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindRunConfig is the kind of RunConfig.
const KindRunConfig = "RunConfig"

// RunConfig holds the settings of `sluice run`, so a team can commit its
// live-session set-up; the command's flags override it.
type RunConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RunConfigSpec `json:"spec"`
}

// Run modes.
const (
	RunModeReplace = "replace"
	RunModeVersion = "version"
)

// The pauses of a replace session.
const (
	RunPauseObject = "object"
	RunPauseOwner  = "owner"
)

// RunConfigSpec mirrors the flags of `sluice run`.
type RunConfigSpec struct {
	// Path is the directory to render, relative to this file. With Repo,
	// it is a path inside that repository.
	Path string `json:"path,omitempty"`
	// Namespace is given to namespaced objects that have none.
	Namespace string `json:"namespace,omitempty"`
	// Context is the kubeconfig context.
	Context string `json:"context,omitempty"`
	// Session names the session; the default is USER-DIRNAME.
	Session string `json:"session,omitempty"`
	// Mode is replace (the default) or version.
	Mode string `json:"mode,omitempty"`
	// Pause is how much of GitOps a replace session pauses: object (the
	// default: only the objects it changes, where the owner's controller
	// honours that, else the owner) or owner (every owner suspended).
	Pause string `json:"pause,omitempty"`
	// Values are values files for a chart, relative to this file; without
	// them a chart takes the values of the HelmRelease that deploys it.
	Values []string `json:"values,omitempty"`
	// HelmRelease names (NAMESPACE/NAME) the HelmRelease whose values a
	// chart is rendered with.
	HelmRelease string `json:"helmRelease,omitempty"`
	// AsOwner names the GitOps object ([Kustomization/]NAMESPACE/NAME)
	// whose settings the path is rendered with, as its tool renders it;
	// "none" renders the path as it is. Empty finds the Flux
	// Kustomization whose source and path are the path's.
	AsOwner string `json:"asOwner,omitempty"`
	// Repo and Ref run the session on a checkout of that branch.
	Repo string `json:"repo,omitempty"`
	Ref  string `json:"ref,omitempty"`
	// Poll refreshes that checkout this often.
	Poll *metav1.Duration `json:"poll,omitempty"`
	// Handoff keeps the objects at the end and writes the Flux
	// configuration that adopts them, to HandoffFile.
	Handoff     bool   `json:"handoff,omitempty"`
	HandoffFile string `json:"handoffFile,omitempty"`
	// AllowClusterScoped lets version mode apply cluster-scoped objects.
	AllowClusterScoped bool `json:"allowClusterScoped,omitempty"`
	// ReadyTimeout bounds the readiness check after each apply.
	ReadyTimeout *metav1.Duration `json:"readyTimeout,omitempty"`
}

// Default fills in the RunConfig defaults.
func (r *RunConfig) Default() {
	if r.APIVersion == "" {
		r.APIVersion = APIVersion
	}
	if r.Kind == "" {
		r.Kind = KindRunConfig
	}
	if r.Spec.Mode == "" {
		r.Spec.Mode = RunModeReplace
	}
	if r.Spec.Pause == "" {
		r.Spec.Pause = RunPauseObject
	}
}
