package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types, as kstatus and Flux users read them.
const (
	// ConditionReady is True when the last reconcile did what the spec
	// asks, False when it failed.
	ConditionReady = "Ready"
	// ConditionReconciling is True while a reconcile is under way for the
	// current generation.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the spec cannot succeed as it is (it
	// is invalid, or names what the controller refuses): retrying will
	// not help until it changes.
	ConditionStalled = "Stalled"
)

// Condition reasons.
const (
	ReasonSucceeded   = "Succeeded"   // done: committed, or already up to date
	ReasonProgressing = "Progressing" // a reconcile is under way
	ReasonFailed      = "Failed"      // the reconcile failed; it is retried
	ReasonLocked      = "Locked"      // a developer's takeover holds the folder
	// ReasonVerificationFailed: the source's commit or tag is not signed
	// by a trusted key (spec.source.verify).
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonPullRequestOpen: the change waits for review in a pull request.
	ReasonPullRequestOpen = "PullRequestOpen"
	ReasonInvalid         = "Invalid"   // the spec cannot succeed as it is
	ReasonSuspended       = "Suspended" // spec.suspend is set
)

// ReconcileRequestAnnotation, set to any new value (a timestamp), asks the
// controller to reconcile at once, as Flux's reconcile.fluxcd.io/requestedAt
// does.
const ReconcileRequestAnnotation = "reconcile.sluice.dev/requestedAt"

// ReconcileRequestForAnnotation, set with a reconcile request, says what
// the request is about: "source" (a git push: the source is fetched
// again, tags are looked up as their interval says) or "images" (a
// registry push: the tags are looked up again). Without it a request is
// about both.
const ReconcileRequestForAnnotation = "reconcile.sluice.dev/requestedFor"

// What a reconcile request is about (ReconcileRequestForAnnotation).
const (
	RequestForSource = "source"
	RequestForImages = "images"
)

// ReconcileStatus is what every resource's status has: the generation
// reconciled, its conditions, and the reconcile request handled last.
type ReconcileStatus struct {
	// ObservedGeneration is the generation of the spec last reconciled.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are Ready, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastHandledReconcileAt is the value of the annotation
	// reconcile.sluice.dev/requestedAt the controller last acted on.
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// LastError is the last reconcile's failure ("" after a success).
	LastError string `json:"lastError,omitempty"`
}

// ManifestSyncStatus is what the controller last did with a ManifestSync.
type ManifestSyncStatus struct {
	ReconcileStatus `json:",inline"`
	// Source is what was read: repository, ref, commit, folder and its
	// tree hash.
	Source *ProvenanceSource `json:"source,omitempty"`
	// Destination is where the folder was written, and the commit that
	// holds it.
	Destination *DestinationStatus `json:"destination,omitempty"`
	// Images are the images pinned, with their digests.
	Images []PinnedImage `json:"images,omitempty"`
	// Deployer is the tool the folder was hydrated for.
	Deployer string `json:"deployer,omitempty"`
	// Warnings say, one line each and naming the hook, where the deployer
	// will not do with the folder what Helm would do with the chart.
	Warnings []string `json:"warnings,omitempty"`
	// Generated names the chart templates that generated values
	// (passwords, keys, certificates, now), with their functions: the
	// values derive from the sync key and are never shown.
	Generated []string `json:"generated,omitempty"`
	// Lock is the developer's takeover that holds the folder, if any.
	Lock *Takeover `json:"lock,omitempty"`
	// PullRequest is the pull request proposing the sync's change
	// (pullRequest mode).
	PullRequest *PullRequestStatus `json:"pullRequest,omitempty"`
}

// Pull request states.
const (
	PullRequestOpen   = "open"
	PullRequestMerged = "merged"
	PullRequestClosed = "closed"
)

// PullRequestStatus is a pull request as the forge last said.
type PullRequestStatus struct {
	URL    string `json:"url"`
	Number int    `json:"number"`
	// State is open, merged or closed.
	State string `json:"state"`
	// Branch is the branch it proposes from; Commit that branch's tip.
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
	// MergeCommit is the base branch's commit that merged it.
	MergeCommit string `json:"mergeCommit,omitempty"`
}

// DestinationStatus is a hydrated folder and the commit holding it.
type DestinationStatus struct {
	Repo string `json:"repo"`
	// Branch is a git destination's.
	Branch string `json:"branch,omitempty"`
	// Tag is an OCI destination's.
	Tag  string `json:"tag,omitempty"`
	Path string `json:"path"`
	// Commit is the git destination's commit that holds the folder.
	Commit string `json:"commit,omitempty"`
	// Digest is the OCI destination's artifact that holds the folder
	// (its manifest's digest, which the tag names).
	Digest string `json:"digest,omitempty"`
}

// ImageStatus is what the controller last did with an Image.
type ImageStatus struct {
	ReconcileStatus `json:",inline"`
	// LastBuild is the image last built or found built.
	LastBuild *ImageBuild `json:"lastBuild,omitempty"`
}

// ImageBuild is one build of an Image.
type ImageBuild struct {
	// Digest is the pushed manifest's (or index's).
	Digest string `json:"digest"`
	// Tags pushed.
	Tags []string `json:"tags,omitempty"`
	// Inputs is the hash of the image's inputs.
	Inputs string `json:"inputs,omitempty"`
	// Source is the first source's repository and commit.
	Source string `json:"source,omitempty"`
	// Built is false when an image of the same inputs existed and was
	// only tagged.
	Built bool `json:"built"`
}

// RepoConfigStatus is what the controller last did with a RepoConfig.
type RepoConfigStatus struct {
	ReconcileStatus `json:",inline"`
	// Source is the repository and commit read ("REPO@COMMIT").
	Source string `json:"source,omitempty"`
	// ManifestSyncs are the syncs found and what became of each.
	ManifestSyncs []FoundResult `json:"manifestSyncs,omitempty"`
	// Images are the Images found and what became of each.
	Images []FoundResult `json:"images,omitempty"`
}

// FoundResult is what became of one resource a RepoConfig found.
type FoundResult struct {
	Name string `json:"name"`
	// Result is committed, unchanged, locked or failed for a sync; built,
	// tagged or failed for an Image.
	Result string `json:"result"`
	// Commit is a sync's destination commit; Digest an Image's.
	Commit string `json:"commit,omitempty"`
	Digest string `json:"digest,omitempty"`
	Error  string `json:"error,omitempty"`
}
