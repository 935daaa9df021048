// Package owner renders a folder as the GitOps object that deploys it
// would apply it, so that a live session (and `sluice render --as-owner`)
// applies what GitOps would from a working tree, differing only by its
// edits.
//
// For a Flux Kustomization that is what kustomize-controller does with
// its source's copy of the folder: a kustomization.yaml generated over
// the folder (or the folder's own, amended) with the Kustomization's
// targetNamespace, namePrefix and nameSuffix, patches, images and
// components; the build; then, object by object, SOPS decryption with
// the Kustomization's decryption Secret and post-build variable
// substitution from spec.postBuild; then its commonMetadata and the
// owner labels kustomize-controller sets. The ConfigMaps and Secrets it
// names are read as the person running Sluice, as kubectl would read
// them; decrypted data stays in memory.
//
// For an Argo CD Application it is what Argo CD's repo-server generates
// for the source whose path is the folder: the source type from the
// folder, its kustomize options applied as the `kustomize edit` commands
// Argo CD runs, its Helm release name, values files, values and
// parameters, its directory options, then Argo CD's resource tracking.
package owner
