package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
)

// KindManifestSync is the kind of ManifestSync.
const KindManifestSync = "ManifestSync"

// ManifestSync renders one source folder into one folder of a destination
// branch, with every selected image pinned to a digest.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=msync,categories=sluice
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Source Commit",type=string,JSONPath=`.status.source.commit`
// +kubebuilder:printcolumn:name="Destination Commit",type=string,JSONPath=`.status.destination.commit`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type ManifestSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ManifestSyncSpec `json:"spec"`
	// Status is what the controller last did; files read by the command
	// line may leave it out.
	Status ManifestSyncStatus `json:"status,omitempty"`
}

// ManifestSyncList is a list of ManifestSyncs.
//
// +kubebuilder:object:root=true
type ManifestSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ManifestSync `json:"items"`
}

// ManifestSyncSpec is what a ManifestSync renders, how, and where to.
type ManifestSyncSpec struct {
	// Source is the repository folder to render.
	Source Source `json:"source"`
	// Render selects and configures the renderer; by default it is detected
	// from the folder (kustomization.yaml, Chart.yaml, or plain YAML).
	Render *Render `json:"render,omitempty"`
	// Images lists the image references to pin; others stay as written.
	// The first rule whose name matches an image applies.
	Images []ImageRule `json:"images,omitempty"`
	// Destination is the branch folder the rendered manifests are written to.
	Destination Destination `json:"destination"`
	// Deployer says which tool applies the folder (Flux, the default;
	// Argo CD; kubectl), and so what a chart's hooks and tests become.
	// +optional
	Deployer *Deployer `json:"deployer,omitempty"`
	// RegistrySecretRef names a Secret of type kubernetes.io/dockerconfigjson
	// in the sync's namespace, for the registries its images are pinned
	// from (the controller; the command line uses the docker keychain).
	RegistrySecretRef *SecretRef `json:"registrySecretRef,omitempty"`
	// Interval is how often the controller checks the source and the
	// image tags (default 5m). A webhook or the annotation
	// reconcile.sluice.dev/requestedAt asks for a check at once.
	// +kubebuilder:default="5m"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Suspend stops the controller from hydrating the sync.
	Suspend bool `json:"suspend,omitempty"`
	// Prune removes the destination folder when the ManifestSync is
	// deleted; by default the folder stays as it is.
	Prune bool `json:"prune,omitempty"`
}

// SecretRef names a Secret in the namespace of the resource that refers
// to it.
type SecretRef struct {
	// Name of the Secret.
	Name string `json:"name"`
}

// Source names a folder of a git repository or of a local directory.
type Source struct {
	// Repo is an https://, ssh://, scp-like (git@host:org/r.git) or file://
	// URL, or a local path, relative to the file that declares it.
	Repo string `json:"repo"`
	// Ref is a branch, tag or full commit SHA. The default is the remote
	// HEAD; for a local path without a ref, the working tree as it is.
	Ref string `json:"ref,omitempty"`
	// Path is the folder inside the repository. The default is ".".
	Path string `json:"path,omitempty"`
	// SecretRef names a Secret with the repository's credentials, as
	// Flux's GitRepository takes them: username and password (or a token
	// as password), bearerToken, or identity and known_hosts for ssh. The
	// controller reads it; the command line uses its environment.
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Verify, if set, renders only a source commit (or tag) signed by a
	// trusted key, as Flux's GitRepository spec.verify.
	Verify *Verify `json:"verify,omitempty"`
}

// Verify says which signature a source must carry.
type Verify struct {
	// Mode is HEAD (the default: the commit rendered), Tag (the annotated
	// tag the ref names) or TagAndHEAD (both).
	// +kubebuilder:validation:Enum=HEAD;Tag;TagAndHEAD
	Mode string `json:"mode,omitempty"`
	// SecretRef names a Secret whose values are trusted keys: armored
	// OpenPGP public keys, or SSH allowed signers (git's
	// gpg.ssh.allowedSignersFile lines).
	SecretRef SecretRef `json:"secretRef"`
}

// The modes of Verify.
const (
	VerifyHEAD       = "HEAD"
	VerifyTag        = "Tag"
	VerifyTagAndHEAD = "TagAndHEAD"
)

// Render configures the renderers. When exactly one of Kustomize and Helm is
// set it selects that renderer; otherwise the folder decides.
type Render struct {
	Kustomize *KustomizeRender `json:"kustomize,omitempty"`
	Helm      *HelmRender      `json:"helm,omitempty"`
}

// LoadRestrictor values, as in kustomize's --load-restrictor.
const (
	LoadRestrictorRootOnly = "rootOnly"
	LoadRestrictorNone     = "none"
)

// KustomizeRender configures kustomize.
type KustomizeRender struct {
	// LoadRestrictor is rootOnly (the default) or none.
	LoadRestrictor string `json:"loadRestrictor,omitempty"`
	// EnableHelm lets kustomizations inflate helmCharts, rendered with the
	// built-in Helm engine.
	EnableHelm bool `json:"enableHelm,omitempty"`
}

// HelmRender configures the Helm renderer.
type HelmRender struct {
	// ReleaseName is the release name. The default is the sync's name.
	ReleaseName string `json:"releaseName,omitempty"`
	// Namespace is the release namespace (.Release.Namespace).
	Namespace string `json:"namespace,omitempty"`
	// Values are merged over the chart's values and the values files.
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
	// ValuesFiles are read from the chart directory, in order.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// KubeVersion is the Kubernetes version the chart is rendered for
	// (.Capabilities.KubeVersion, and the chart's kubeVersion constraint).
	// The default is helm's: the version its release binary is built for.
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions are added to the API versions the chart sees in
	// .Capabilities.APIVersions, as `helm template --api-versions` adds
	// them ("monitoring.coreos.com/v1/ServiceMonitor").
	APIVersions []string `json:"apiVersions,omitempty"`
	// IncludeCRDs renders the chart's crds/ folder too.
	IncludeCRDs bool `json:"includeCRDs,omitempty"`
	// Chart is a remote chart to render instead of the source folder.
	Chart *HelmChart `json:"chart,omitempty"`
	// GeneratedValuesOutsideSecrets commits values the chart's templates
	// generate from the sync key (a random suffix in a name, a UUID in a
	// ConfigMap) when they are outside a Secret's data, readable in git.
	// Without it such a render fails, naming the object, the field and
	// the template: a generated value is committed only in a Secret's
	// data, encrypted. Previews mask them either way.
	GeneratedValuesOutsideSecrets bool `json:"generatedValuesOutsideSecrets,omitempty"`
}

// HelmChart names a chart in an OCI registry or an https chart repository.
type HelmChart struct {
	// Repo is oci://host/path or an https:// chart repository URL.
	Repo string `json:"repo"`
	// Name is the chart name.
	Name string `json:"name"`
	// Version is a chart version or a semver constraint.
	Version string `json:"version"`
}

// ImageStrategy says how an image rule chooses the digest to pin.
type ImageStrategy string

// Image strategies.
const (
	// StrategyMutableTag resolves the tag as written (or the rule's tag) to
	// the digest it points at now.
	StrategyMutableTag ImageStrategy = "mutableTag"
	// StrategySourceCommit uses the source commit SHA as the tag.
	StrategySourceCommit ImageStrategy = "sourceCommit"
	// StrategySemver picks the highest tag matching a constraint.
	StrategySemver ImageStrategy = "semver"
)

// ImageRule selects image references by repository and says how to pin them.
type ImageRule struct {
	// Name is a repository, exact or a glob ("registry.example.com/team/*",
	// "*").
	Name string `json:"name"`
	// Strategy is mutableTag (the default), sourceCommit or semver.
	// +kubebuilder:validation:Enum=mutableTag;sourceCommit;semver
	Strategy ImageStrategy `json:"strategy,omitempty"`
	// Tag replaces the written tag before resolving (mutableTag only).
	Tag string `json:"tag,omitempty"`
	// TagLength shortens the commit SHA used as tag (sourceCommit only); 0
	// means the full SHA.
	TagLength int `json:"tagLength,omitempty"`
	// Constraint is a semver range such as ">=1.2.0 <2.0.0" (semver only).
	Constraint string `json:"constraint,omitempty"`
	// Optional lets the rules after this one decide (or the image stay as
	// written) when this rule's tag does not exist: how a deployment tag
	// applies to the images built under it and leaves the others alone.
	Optional bool `json:"optional,omitempty"`
	// Verify, if set, pins a digest only when a signature of a trusted key
	// verifies for it; otherwise the sync fails and the folder keeps the
	// digest pinned before.
	Verify *ImageVerify `json:"verify,omitempty"`
}

// ImageVerify says whose signature an image must carry.
type ImageVerify struct {
	// Provider is cosign (signatures where `cosign sign` writes them) or
	// notation (signatures `notation sign` attaches, checked against a
	// Notation trust policy).
	// +kubebuilder:validation:Enum=cosign;notation
	Provider string `json:"provider"`
	// SecretRef names a Secret holding, for cosign, the trusted public
	// key under cosign.pub (as `cosign generate-key-pair` writes it; one
	// of secretRef and keyless); for notation, the trust policy under
	// trustpolicy.json and the certificates of its trust stores under
	// keys ending .crt or .pem (as Flux's OCIRepository reads it).
	// +optional
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Keyless trusts signatures made without a key (`cosign sign` with
	// an OIDC identity): the signing certificate must be issued by a
	// trusted Fulcio to the identity given, and the Rekor bundle attached
	// to the signature must verify (offline).
	// +optional
	Keyless *Keyless `json:"keyless,omitempty"`
}

// Keyless is the identity a keyless signature must come from, as cosign
// verify's --certificate-oidc-issuer(-regexp) and
// --certificate-identity(-regexp) take it. Regular expressions match
// whole values.
type Keyless struct {
	// Issuer is the OIDC issuer that vouched for the signer, such as
	// https://token.actions.githubusercontent.com.
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// IssuerRegExp matches the issuer instead.
	// +optional
	IssuerRegExp string `json:"issuerRegExp,omitempty"`
	// Subject is the signer's identity in the certificate: an e-mail
	// address, or a URI such as a CI workflow's
	// (https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main).
	// +optional
	Subject string `json:"subject,omitempty"`
	// SubjectRegExp matches the identity instead.
	// +optional
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
	// TrustedRootRef names a Secret holding trusted_root.json, the
	// Sigstore trusted root of a private Fulcio and Rekor; Sigstore's
	// public instance when unset.
	// +optional
	TrustedRootRef *SecretRef `json:"trustedRootRef,omitempty"`
}

// Layout values.
const (
	LayoutPerObject = "perObject"
	LayoutSingle    = "single"
)

// Mode values.
const (
	ModePush        = "push"
	ModeBranch      = "branch"
	ModePullRequest = "pullRequest"
)

// Forges a pull request is opened on.
const (
	ForgeGitHub = "github"
	ForgeGitLab = "gitlab"
	ForgeGitea  = "gitea"
)

// PullRequest says how pullRequest mode proposes a change.
type PullRequest struct {
	// Forge is github, gitlab or gitea; the default is read from the
	// repository's host (github.com, gitlab.com, or a host whose name
	// says gitlab or gitea).
	// +kubebuilder:validation:Enum=github;gitlab;gitea
	Forge string `json:"forge,omitempty"`
	// Title and Body are Go templates of the pull request's title and
	// description, given .Branch (the base), .Syncs (each with .Name,
	// .Source, .Path, .Images) and .Stat (the diff stat); the defaults
	// name the syncs, their sources and images, and the stat.
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
	// Labels are set on the pull request.
	Labels []string `json:"labels,omitempty"`
	// Reviewers are asked for a review (user names on the forge).
	Reviewers []string `json:"reviewers,omitempty"`
	// Draft opens it as a draft.
	Draft bool `json:"draft,omitempty"`
	// AutoMerge asks the forge to merge it once its checks pass, where the
	// forge can.
	AutoMerge bool `json:"autoMerge,omitempty"`
}

// Destination is a folder of a branch of a git repository, or of the
// OCI artifact a tag of an OCI repository names.
//
// +kubebuilder:validation:XValidation:rule="self.path != '.' && !self.path.startsWith('/') && !self.path.startsWith('../')",message="path must be a folder inside the branch, not its root"
// +kubebuilder:validation:XValidation:rule="(has(self.repo) && self.repo.startsWith('oci://')) ? (has(self.tag) && !has(self.branch)) : (has(self.branch) && !has(self.tag))",message="an oci:// destination takes a tag and no branch; a git destination a branch and no tag"
type Destination struct {
	// Repo defaults to the source repository. oci://REGISTRY/REPOSITORY
	// is an OCI destination: the folders of every sync of its tag are
	// one OCI artifact, as Flux's OCIRepository and Argo CD's OCI sources
	// deploy it.
	Repo string `json:"repo,omitempty"`
	// Branch is created when missing (as an orphan when the repo is
	// empty). A git destination's; not with an oci:// repo.
	// +optional
	Branch string `json:"branch,omitempty"`
	// Tag is an OCI destination's tag (dev, prod): moved to each new
	// artifact once it is whole in the registry, never to one it did not
	// push. Only with an oci:// repo.
	// +optional
	Tag string `json:"tag,omitempty"`
	// Path is the folder the sync owns; nothing else of the branch changes.
	Path string `json:"path"`
	// Layout is perObject (the default: one file per object) or single
	// (one manifest.yaml).
	// +kubebuilder:validation:Enum=perObject;single
	Layout string `json:"layout,omitempty"`
	// Mode is push (the default); branch: push to sluice/<branch>/<name>
	// for review instead; or pullRequest: the syncs writing this branch
	// propose their changes in one pull request (from sluice/pr/<branch>),
	// kept up to date, rebased on the branch, closed when nothing is left
	// to propose.
	// +kubebuilder:validation:Enum=push;branch;pullRequest
	Mode string `json:"mode,omitempty"`
	// PullRequest configures pullRequest mode.
	PullRequest *PullRequest `json:"pullRequest,omitempty"`
	// SecretRef names a Secret with the destination repository's
	// credentials (see Source.SecretRef).
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Signing signs every commit the sync makes.
	Signing *Signing `json:"signing,omitempty"`
	// Secrets is what becomes of the Secrets a render gives: encrypt (the
	// default: each is committed SOPS-encrypted for the recipients sops
	// names, and a sync with a Secret and no recipient fails), omit (left
	// out: External Secrets, Sealed Secrets or a vault plugin provides
	// them), or plaintext (committed readable: an explicit opt-in).
	// +kubebuilder:validation:Enum=encrypt;omit;plaintext
	// +optional
	Secrets string `json:"secrets,omitempty"`
	// SOPS names the recipients the folder's Secrets are encrypted for.
	// +optional
	SOPS *SOPS `json:"sops,omitempty"`
}

// Signing names how what the sync writes is signed.
//
// A git destination's commits: a Secret holding an SSH private key under
// "identity" (git's gpg.format=ssh signatures), or an armored OpenPGP
// private key under "git.asc" (with its passphrase, if it is encrypted,
// under "passphrase"), as Flux's image-automation-controller reads one.
//
// An OCI destination's artifacts, each signed before its tag moves and
// given an in-toto SLSA provenance attestation: provider cosign with a
// Secret holding cosign.key (and cosign.password when it is encrypted:
// what `cosign generate-key-pair k8s://NAMESPACE/NAME` writes), or with
// keyless (a short-lived certificate for the controller's own identity);
// provider notation with a Secret holding a certificate and its key
// (tls.crt and tls.key, with ca.crt: a kubernetes.io/tls Secret, such as
// cert-manager issues).
type Signing struct {
	// Provider signs an OCI destination's artifacts: cosign (the default)
	// or notation. A git destination's commits take none.
	// +kubebuilder:validation:Enum=cosign;notation
	// +optional
	Provider string `json:"provider,omitempty"`
	// SecretRef names the Secret of the key. Required, except for
	// keyless cosign signing.
	// +optional
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// Keyless signs with cosign through Sigstore, with no key to keep: a
	// certificate Fulcio issues for the controller's service account
	// (its token, of audience sigstore) at each signature, a signed
	// timestamp that proves the signature was made while it was valid,
	// and an entry in the transparency log.
	// +optional
	Keyless *SigningKeyless `json:"keyless,omitempty"`
}

// The signing providers of an OCI destination.
const (
	SigningCosign   = "cosign"
	SigningNotation = "notation"
)

// SigningKeyless is the Sigstore instance keyless signatures are made
// with.
type SigningKeyless struct {
	// FulcioURL is the certificate authority that issues the signing
	// certificate for the identity token (Sigstore's public instance,
	// https://fulcio.sigstore.dev, by default).
	// +optional
	FulcioURL string `json:"fulcioURL,omitempty"`
	// TimestampURL is the RFC 3161 timestamp authority that timestamps
	// each signature (Sigstore's public one,
	// https://timestamp.sigstore.dev/api/v1/timestamp, by default).
	// +optional
	TimestampURL string `json:"timestampURL,omitempty"`
	// RekorURL is the transparency log each signature is recorded in
	// (Sigstore's public Rekor, https://rekor.sigstore.dev, by default),
	// as verifiers of keyless signatures ask.
	// +optional
	RekorURL string `json:"rekorURL,omitempty"`
}

// Sigstore's public instance, keyless signing's default.
const (
	DefaultFulcioURL    = "https://fulcio.sigstore.dev"
	DefaultTimestampURL = "https://timestamp.sigstore.dev/api/v1/timestamp"
	DefaultRekorURL     = "https://rekor.sigstore.dev"
)

// IsOCI reports whether the destination is an OCI repository
// (oci://REGISTRY/REPOSITORY and a tag) rather than a git one.
func (d Destination) IsOCI() bool { return strings.HasPrefix(d.Repo, OCIScheme) }

// OCIScheme prefixes an OCI destination's repository.
const OCIScheme = "oci://"

// Target is what the destination writes: the branch of a git
// destination, the tag of an OCI one.
func (d Destination) Target() string {
	if d.IsOCI() {
		return d.Tag
	}
	return d.Branch
}

// PullRequestBranch is the branch pullRequest mode proposes from, one per
// base branch, owned by Sluice (it is force-pushed).
func (d Destination) PullRequestBranch() string {
	return "sluice/pr/" + d.Branch
}

// Follows reports whether the source may follow branch: its ref names
// the branch (short, or as refs/heads/), or is empty (the repository's
// default branch, which only a clone tells).
func (s Source) Follows(branch string) bool {
	return s.Ref == "" || s.Ref == branch || s.Ref == "refs/heads/"+branch
}

// ReviewBranch is the branch a sync in branch mode pushes to.
func (d Destination) ReviewBranch(sync string) string {
	return "sluice/" + d.Branch + "/" + sync
}
