// Package hydrate runs ManifestSyncs: for each, it renders the source,
// pins the images, and writes the folder into its destination branch with
// a provenance record, skipping without rendering every sync whose inputs
// and digests did not change. Syncs run in parallel; those writing the
// same branch land in one commit; one failing sync never blocks the
// others nor leaves its folder half-written.
package hydrate
