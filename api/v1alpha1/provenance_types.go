package v1alpha1

import "time"

// KindProvenance is the kind of the record Sluice writes as .sluice.yaml in
// every folder it hydrates.
const KindProvenance = "Provenance"

// ProvenanceFile is the name of the provenance record inside a folder.
const ProvenanceFile = ".sluice.yaml"

// SourceIgnoreFile is the .sourceignore Sluice writes beside the record,
// so that Flux's source-controller leaves the record out of the artifacts
// it makes of the branch: kustomize-controller would otherwise take it for
// an object of the folder (it generates a kustomization of every YAML
// file). Argo CD skips the record by the marker the record holds.
const SourceIgnoreFile = ".sourceignore"

// SourceIgnore is that file's content.
const SourceIgnore = "# Written by Sluice: Flux leaves Sluice's provenance record out of what it applies.\n" + ProvenanceFile + "\n"

// Provenance says what a hydrated folder was rendered from and by which
// rules. It is deterministic: the same inputs give the same bytes, so an
// unchanged sync writes nothing.
type Provenance struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Sync is the ManifestSync that owns the folder.
	Sync string `json:"sync"`
	// Namespace is the sync's namespace, where it has one (a controller's
	// ManifestSync): syncs of one name in two namespaces are two owners.
	Namespace string `json:"namespace,omitempty"`
	// Source is what was read.
	Source ProvenanceSource `json:"source"`
	// Renderer is the engine that rendered it.
	Renderer Renderer `json:"renderer"`
	// Render holds the render settings in effect.
	Render *Render `json:"render,omitempty"`
	// Rules are the image rules in effect.
	Rules []ImageRule `json:"rules,omitempty"`
	// Images lists every image reference that was pinned.
	Images []PinnedImage `json:"images,omitempty"`
	// Waiting lists the image references only optional rules matched and
	// that stay as written because their tags do not exist yet: the sync
	// re-renders when one appears.
	Waiting []string `json:"waiting,omitempty"`
	// Inputs lists every path the renderer looked at, with its git object
	// hash: what decides whether a new source commit needs a new render.
	Inputs []Input `json:"inputs,omitempty"`
	// Trees are the git tree hashes of the folders holding the inputs: a
	// folder whose hash did not change needs no look at its files.
	Trees []Input `json:"trees,omitempty"`
	// Chart is the remote chart rendered, if any.
	Chart *PinnedChart `json:"chart,omitempty"`
	// Fingerprint is a digest over the sync's settings, the renderer, the
	// inputs and the pinned digests.
	Fingerprint string `json:"fingerprint"`
	// Manifests is a digest over the folder's other files, so that a folder
	// edited by hand is repaired on the next run.
	Manifests string `json:"manifests"`
	// Takeover, when set, says a developer's takeover rendered the folder,
	// and locks it: until Expires, a regular hydration skips it.
	Takeover *Takeover `json:"takeover,omitempty"`
	// Deployer is the tool the folder was hydrated for
	// (spec.deployer.tool): what applies it.
	Deployer string `json:"deployer,omitempty"`
	// Hooks are the chart's hooks, and what became of each for the
	// deployer.
	Hooks []Hook `json:"hooks,omitempty"`
	// Generated names the templates that generated values (randAlphaNum,
	// genCA, uuidv4, now...) and with which functions, never the values:
	// they are derived from the sync key, the same at every hydration.
	Generated []Generated `json:"generated,omitempty"`
	// Lookups names the templates that called lookup: they were rendered
	// as on a first install, where lookup finds nothing.
	Lookups []string `json:"lookups,omitempty"`
	// Secrets are the Secrets the render gave, and what became of each.
	Secrets []SecretRecord `json:"secrets,omitempty"`
	// Warnings say, one line each, where what the deployer will do with
	// the folder differs from what Helm would have done with the chart.
	Warnings []string `json:"warnings,omitempty"`
}

// Hook is one hook of a chart (an object annotated helm.sh/hook) and what
// became of it.
type Hook struct {
	// Object is Kind/namespace/name (Kind/name when cluster-scoped).
	Object string `json:"object"`
	// Template is the chart's template that made it.
	Template string `json:"template,omitempty"`
	// Events, Weight and DeletePolicies are its helm.sh/hook,
	// helm.sh/hook-weight and helm.sh/hook-delete-policy.
	Events         []string `json:"events"`
	Weight         int      `json:"weight,omitempty"`
	DeletePolicies []string `json:"deletePolicies,omitempty"`
	// Applied says where it went: a phase's subfolder and Kustomization,
	// Argo CD's sync phase, "with the release", or "left out".
	Applied string `json:"applied"`
	// Unsupported says what the deployer does with it that Helm does not
	// (empty when nothing).
	Unsupported string `json:"unsupported,omitempty"`
}

// Generated names a template that generated values.
type Generated struct {
	Template string `json:"template"`
	// Functions are the generating functions it called.
	Functions []string `json:"functions"`
}

// What became of a Secret (SecretRecord.Committed).
const (
	SecretEncrypted = "encrypted"
	SecretOmitted   = "omitted"
	SecretPlaintext = "plaintext"
	// SecretAsIs is a Secret the source holds already SOPS-encrypted.
	SecretAsIs = "as-is"
)

// SecretRecord is one Secret of a render, without its values.
type SecretRecord struct {
	// Object is Secret namespace/name.
	Object string `json:"object"`
	// Keys are its data and stringData keys.
	Keys []string `json:"keys,omitempty"`
	// Digest is an HMAC-SHA256 of its content under the sync key: how a
	// Secret is known unchanged without decrypting it (its encrypted file
	// then stays as it was).
	Digest string `json:"digest,omitempty"`
	// Committed is encrypted, omitted, plaintext or as-is.
	Committed string `json:"committed"`
	// Recipients digests the SOPS recipients it was encrypted for.
	Recipients string `json:"recipients,omitempty"`
	// Values digests each data and stringData key's value under the sync
	// key, each bound to its Secret and key: a dry run says which keys
	// changed, and no digest can be compared with another key's, another
	// Secret's, or a guess by whoever lacks the key.
	Values map[string]string `json:"values,omitempty"`
}

// Takeover records a developer's takeover of a destination folder.
type Takeover struct {
	// Owner is user@host.
	Owner string `json:"owner"`
	// Commit is the HEAD of the working tree rendered; Diff a hash of its
	// uncommitted changes to the files the render read ("" when clean).
	Commit string `json:"commit,omitempty"`
	Diff   string `json:"diff,omitempty"`
	// Tag is the mutable deployment tag images were pinned to.
	Tag string `json:"tag,omitempty"`
	// Expires ends the lock (RFC 3339).
	Expires string `json:"expires"`
	// Unverified says the sync asks for signed sources
	// (spec.source.verify) and the working tree rendered was not checked:
	// it is the developer's own work.
	Unverified bool `json:"unverified,omitempty"`
}

// ProvenanceSource records the source of a hydrated folder.
type ProvenanceSource struct {
	// Repo is the repository as the ManifestSync names it, without
	// credentials.
	Repo string `json:"repo"`
	Ref  string `json:"ref,omitempty"`
	// Commit is the commit rendered; for a working tree, its HEAD.
	Commit string `json:"commit,omitempty"`
	// Dirty is set when a working tree was rendered whose files differ
	// from Commit.
	Dirty bool   `json:"dirty,omitempty"`
	Path  string `json:"path"`
	// Tree is the git tree hash of Path at Commit.
	Tree string `json:"tree,omitempty"`
	// SignedBy is the trusted key whose signature spec.source.verify
	// found on the commit (and tag) rendered.
	SignedBy string `json:"signedBy,omitempty"`
}

// Renderer names a rendering engine and its version.
type Renderer struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// PinnedImage is one image reference as written and as pinned.
type PinnedImage struct {
	// Name is the repository as written in the manifests.
	Name string `json:"name"`
	// From is the reference as written before pinning.
	From   string `json:"from"`
	Tag    string `json:"tag"`
	Digest string `json:"digest"`
	// Verified says whose signature was verified for Digest before it was
	// pinned (the rule's verify): "cosign key of Secret ci-cosign-key", or
	// "cosign keyless, <identity> (issuer <OIDC issuer>)".
	Verified string `json:"verified,omitempty"`
}

// Ref is the pinned reference written into the manifests.
func (p PinnedImage) Ref() string { return p.Name + ":" + p.Tag + "@" + p.Digest }

// Input is one path the renderer read, with its git object hash: a blob
// hash for a file, "tree" for a directory it only tested, "tree:<hash of
// the names>" for a directory it listed, "none" for a path it found absent.
type Input struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
}

// PinnedChart is a remote chart as requested and as fetched.
type PinnedChart struct {
	Repo    string `json:"repo"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// ExpiresAt is when the lock ends, and false when Expires is not a time
// (a record edited by hand, or written by a future version).
func (t *Takeover) ExpiresAt() (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, t.Expires)
	return at, err == nil
}

// Holds reports whether the lock still holds at now. A lock whose expiry
// cannot be read holds: only its owner's release or a steal ends it, never
// a misreading.
func (t *Takeover) Holds(now time.Time) bool {
	at, ok := t.ExpiresAt()
	return !ok || now.Before(at)
}
