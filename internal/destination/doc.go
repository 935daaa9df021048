// Package destination writes rendered folders into branches of git
// repositories: one commit per branch for every folder that changed,
// nothing else of the branch touched (files beside a folder keep their
// very blobs), pushed without force and retried on top of the new tip when
// someone else pushed meanwhile.
package destination
