package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindImage is the kind of Image.
const KindImage = "Image"

// Image builds a container image from files of one or more sources laid
// onto a base image, and pushes it under some tags.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=sluice
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.status.lastBuild.digest`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type Image struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ImageSpec   `json:"spec"`
	Status ImageStatus `json:"status,omitempty"`
}

// ImageList is a list of Images.
//
// +kubebuilder:object:root=true
type ImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Image `json:"items"`
}

// Image tags with a meaning of their own.
const (
	// TagSourceCommit is replaced by the commit of the image's (first)
	// source.
	TagSourceCommit = "sourceCommit"
)

// ImageSpec says what to build and where to push it.
type ImageSpec struct {
	// Image is the repository pushed to, without tag or digest.
	Image string `json:"image"`
	// Base is the image the files are laid onto; a multi-platform base
	// gives a multi-platform result. "scratch" is the empty image.
	Base string `json:"base"`
	// Source lists where the files come from.
	Source []ImageSource `json:"source"`
	// Config sets the image's configuration over the base's.
	Config ImageConfig `json:"config,omitempty"`
	// Tags are pushed: sourceCommit, or literal tags. A takeover adds its
	// deployment tag.
	Tags []string `json:"tags,omitempty"`
	// Builder delegates the build to an external command instead of the
	// built-in layer builder. The controller runs none unless started with
	// --allow-builders.
	Builder *ImageBuilder `json:"builder,omitempty"`
	// RegistrySecretRef names a Secret of type kubernetes.io/dockerconfigjson
	// for pulling the base and pushing the image (the controller).
	RegistrySecretRef *SecretRef `json:"registrySecretRef,omitempty"`
	// Interval is how often the controller checks the sources (default 5m).
	// +kubebuilder:default="5m"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Suspend stops the controller from building the Image.
	Suspend bool `json:"suspend,omitempty"`
}

// ImageSource is a repository (or local path) and the files taken from it.
type ImageSource struct {
	// Repo and Ref are as in a ManifestSync's source.
	Repo string `json:"repo"`
	Ref  string `json:"ref,omitempty"`
	// SecretRef names a Secret with the repository's credentials, as a
	// ManifestSync's source does.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Mappings copy files into the image.
	Mappings []Mapping `json:"mappings"`
}

// Mapping copies the files matching Src (a doublestar glob, relative to the
// source's root) to Dest in the image: a file to Dest itself when Src names
// one file, otherwise each file to Dest plus its path with Strip removed.
type Mapping struct {
	Src   string `json:"src"`
	Dest  string `json:"dest"`
	Strip string `json:"strip,omitempty"`
}

// ImageConfig is the part of an image's configuration an Image sets.
type ImageConfig struct {
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	User       string            `json:"user,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ImageBuilder is an external build command, run in the first source's
// root with $IMAGE set to the repository:tag to push. It must push that
// reference.
type ImageBuilder struct {
	Command []string `json:"command"`
}

// Default fills in the Image defaults.
func (i *Image) Default() {
	if i.APIVersion == "" {
		i.APIVersion = APIVersion
	}
	if i.Kind == "" {
		i.Kind = KindImage
	}
	if len(i.Spec.Tags) == 0 {
		i.Spec.Tags = []string{TagSourceCommit}
	}
}
