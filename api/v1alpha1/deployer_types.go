package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The tools that apply a hydrated folder (Deployer.Tool).
const (
	// DeployerFlux is Flux's kustomize-controller, through a
	// Kustomization of the destination branch: the default.
	DeployerFlux = "flux"
	// DeployerArgoCD is Argo CD, through an Application whose source is
	// the folder (a directory source).
	DeployerArgoCD = "argocd"
	// DeployerKubectl is `kubectl apply -f` of the folder.
	DeployerKubectl = "kubectl"
)

// What becomes of a chart hook its deployer cannot run as Helm does
// (Deployer.UnsupportedHooks).
const (
	// HooksWarn commits the folder and says, naming each hook, in the
	// record, the sync's status and the dry run.
	HooksWarn = "warn"
	// HooksRefuse fails the sync instead, naming each hook.
	HooksRefuse = "refuse"
)

// Deployer says which tool applies a sync's folder, and so what a chart's
// hooks and tests become in it: a folder holds what that tool would have
// put on the cluster had it deployed the chart itself (helm-controller for
// Flux, Argo CD's own Helm support), not what `helm template` prints.
type Deployer struct {
	// Tool is flux (the default: Flux's kustomize-controller applies the
	// folder), argocd (an Argo CD Application's directory source) or
	// kubectl (`kubectl apply -f`).
	// +kubebuilder:validation:Enum=flux;argocd;kubectl
	// +optional
	Tool string `json:"tool,omitempty"`
	// HelmTests keeps a chart's test hooks (helm.sh/hook: test), which
	// `helm install`, helm-controller and Argo CD never apply; by default
	// they are left out of the folder.
	// +optional
	HelmTests bool `json:"helmTests,omitempty"`
	// UnsupportedHooks is what a chart hook the tool cannot run as Helm
	// does makes of the sync: warn (the default: the folder is committed
	// and each such hook is named in the record, the status and the dry
	// run) or refuse (the sync fails, naming them).
	// +kubebuilder:validation:Enum=warn;refuse
	// +optional
	UnsupportedHooks string `json:"unsupportedHooks,omitempty"`
	// Flux, for the flux tool, has a chart's hooks run in Helm's phases:
	// the folder then holds Flux Kustomizations, one per phase, each
	// applying a subfolder once the phase before it is done (dependsOn,
	// wait), hook objects re-created when they change (force). Without
	// it, hooks are applied with the rest of the folder, and said.
	// +optional
	Flux *FluxPhases `json:"flux,omitempty"`
}

// FluxPhases configures the Flux Kustomizations that apply a chart's hook
// phases in order.
type FluxPhases struct {
	// SourceRef is the Flux source the phase Kustomizations read the
	// destination branch from: the one the Kustomization applying the
	// folder reads.
	SourceRef FluxSourceRef `json:"sourceRef"`
	// Namespace is where the phase Kustomizations are created; the
	// default is the source's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Interval is the phase Kustomizations' interval (default 10m).
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Timeout bounds each phase, as Helm's --timeout bounds a hook
	// (default 5m).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// ServiceAccountName is the service account the phase Kustomizations
	// apply as (multi-tenant Flux).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// DecryptionSecretRef names the Secret of SOPS keys the phase
	// Kustomizations decrypt the folder's Secrets with (their
	// spec.decryption); required when the folder holds encrypted Secrets.
	// +optional
	DecryptionSecretRef *SecretRef `json:"decryptionSecretRef,omitempty"`
}

// FluxSourceRef names a Flux source.
type FluxSourceRef struct {
	// Kind is GitRepository (the default), OCIRepository or Bucket.
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the source.
	Name string `json:"name"`
	// Namespace of the source; the default is flux-system.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// What becomes of the Secrets a render gives (Destination.Secrets).
const (
	// SecretsEncrypt commits each Secret SOPS-encrypted for the
	// destination's recipients, as kustomize-controller's
	// spec.decryption decrypts it: the default.
	SecretsEncrypt = "encrypt"
	// SecretsOmit leaves Secrets out of the folder (External Secrets,
	// Sealed Secrets or a vault plugin provides them on the cluster).
	SecretsOmit = "omit"
	// SecretsPlaintext commits Secrets readable, as rendered: an explicit
	// opt-in.
	SecretsPlaintext = "plaintext"
)

// SOPS names the recipients a folder's Secrets are encrypted for, as a
// .sops.yaml creation rule names them. Each recipient can decrypt on its
// own.
type SOPS struct {
	// Age recipients (age1...).
	// +optional
	Age []string `json:"age,omitempty"`
	// PGP are OpenPGP key fingerprints, whose public keys are in the
	// GnuPG keyring of the process hydrating ($GNUPGHOME).
	// +optional
	PGP []string `json:"pgp,omitempty"`
	// AWSKMS are AWS KMS key ARNs, used with the hydrating process's AWS
	// credentials.
	// +optional
	AWSKMS []string `json:"awsKMS,omitempty"`
	// GCPKMS are GCP KMS key resource IDs
	// (projects/P/locations/L/keyRings/R/cryptoKeys/K).
	// +optional
	GCPKMS []string `json:"gcpKMS,omitempty"`
	// AzureKeyVault are Azure Key Vault key URLs
	// (https://VAULT.vault.azure.net/keys/NAME/VERSION).
	// +optional
	AzureKeyVault []string `json:"azureKeyVault,omitempty"`
	// HCVaultTransit are HashiCorp Vault transit key URIs
	// (https://vault:8200/v1/transit/keys/NAME).
	// +optional
	HCVaultTransit []string `json:"hcVaultTransit,omitempty"`
}

// Empty reports whether no recipient is named.
func (s *SOPS) Empty() bool {
	return s == nil || len(s.Age)+len(s.PGP)+len(s.AWSKMS)+len(s.GCPKMS)+len(s.AzureKeyVault)+len(s.HCVaultTransit) == 0
}

// RotateGeneratedAnnotation, set on a ManifestSync to a new value, gives
// the values its chart's templates generate (randAlphaNum, genCA...) anew
// at the next hydration: they are derived from the generation key, the
// sync and this value.
const RotateGeneratedAnnotation = "sluice.dev/rotate-generated"

// DeployerTool is the tool that applies the sync's folder, its default
// filled in.
func (s *ManifestSyncSpec) DeployerTool() string {
	if s.Deployer == nil || s.Deployer.Tool == "" {
		return DeployerFlux
	}
	return s.Deployer.Tool
}
