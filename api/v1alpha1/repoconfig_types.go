package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindRepoConfig is the kind of RepoConfig.
const KindRepoConfig = "RepoConfig"

// RepoConfig is a repository whose Sluice resources are reconciled
// together: the Images and ManifestSyncs found in it, each transformed by
// the overrides first.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=sluice
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type RepoConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RepoConfigSpec   `json:"spec"`
	Status RepoConfigStatus `json:"status,omitempty"`
}

// RepoConfigList is a list of RepoConfigs.
//
// +kubebuilder:object:root=true
type RepoConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RepoConfig `json:"items"`
}

// RepoConfigSpec says where the resources are and how to transform them.
type RepoConfigSpec struct {
	// Repo and Ref are as in a ManifestSync's source; a local path without
	// a ref is read as it is on disk.
	Repo string `json:"repo"`
	Ref  string `json:"ref,omitempty"`
	// SecretRef names a Secret with the repository's credentials, as a
	// ManifestSync's source does. It reads this repository only: the
	// resources found get what Credentials lends them.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Credentials are the Secrets of the RepoConfig's namespace that the
	// resources found may use, each for one URL: whoever writes to the
	// repository chooses neither which Secret the controller sends nor
	// where. A resource found that names a Secret itself is refused.
	Credentials FoundCredentials `json:"credentials,omitempty"`
	// Interval is how often the controller reconciles (default 5m).
	// +kubebuilder:default="5m"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Suspend stops the controller from reconciling the RepoConfig.
	Suspend bool `json:"suspend,omitempty"`
	// Globs are the files searched for Sluice resources (doublestar
	// patterns, relative to the repository's root).
	Globs []string `json:"globs"`
	// Selectors take the resources whose labels match any of them; none
	// takes all.
	Selectors []metav1.LabelSelector `json:"selectors,omitempty"`
	// Overrides transform every resource found, in memory.
	Overrides Overrides `json:"overrides,omitempty"`
	// AllowBuilders lets the Images found run their spec.builder command
	// on the machine that reconciles this RepoConfig. Without it, an Image
	// with a builder fails: whoever can write to the repository would
	// otherwise run commands here. Only the RepoConfig (or a flag) can
	// allow it, never the repository's own files.
	AllowBuilders bool `json:"allowBuilders,omitempty"`
	// AllowPullRequestTemplates lets the ManifestSyncs found set their
	// pull request's title and body templates. Without it, one that sets
	// them is refused and the defaults are used by the others: a template
	// runs in the controller (bounded in output and time).
	AllowPullRequestTemplates bool `json:"allowPullRequestTemplates,omitempty"`
}

// FoundCredentials lend Secrets to the resources a RepoConfig finds, by
// where they are sent.
type FoundCredentials struct {
	// Git lends git credentials Secrets (as a ManifestSync's source reads
	// them) to the sources and destinations found at one URL.
	Git []GitCredential `json:"git,omitempty"`
	// Registries lend kubernetes.io/dockerconfigjson Secrets, for image
	// look-ups and pushes, to one registry host each.
	Registries []RegistryCredential `json:"registries,omitempty"`
}

// GitCredential lends one git credentials Secret to the repositories of
// one URL.
type GitCredential struct {
	// URL is the scheme, host and port the Secret is sent to
	// ("https://git.example.com", "ssh://git.example.com:2222"): every
	// repository found there reads and writes with it, and nothing else
	// gets it. A path, if given, is ignored.
	URL string `json:"url"`
	// SecretRef names the Secret, in the RepoConfig's namespace.
	SecretRef SecretRef `json:"secretRef"`
}

// RegistryCredential lends one dockerconfigjson Secret's entry for one
// registry host.
type RegistryCredential struct {
	// Host is the registry ("registry.example.com", "host:5000"): its
	// entry in the Secret's auths is what the resources found use, and
	// only there.
	Host string `json:"host"`
	// SecretRef names the Secret, in the RepoConfig's namespace.
	SecretRef SecretRef `json:"secretRef"`
}

// Overrides transform resources before they are reconciled.
type Overrides struct {
	// Repos replace git references: every ManifestSync and Image source,
	// and every remote base a kustomization names, whose repository is
	// From (with its ref) reads To instead.
	Repos []RepoOverride `json:"repos,omitempty"`
	// Images give matching images a mutable deployment tag: Images push
	// it, ManifestSyncs pin to it where it exists.
	Images []ImageOverride `json:"images,omitempty"`
}

// RepoOverride replaces one repository by another: a branch of it
// ("URL?ref=BRANCH"), another URL, or a local path or file:// URL.
type RepoOverride struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ImageOverride tags the images of repositories matching Name (exact or
// a glob) with Tag.
type ImageOverride struct {
	Name string `json:"name"`
	Tag  string `json:"tag"`
}

// Default fills in the RepoConfig defaults.
func (r *RepoConfig) Default() {
	if r.APIVersion == "" {
		r.APIVersion = APIVersion
	}
	if r.Kind == "" {
		r.Kind = KindRepoConfig
	}
}
