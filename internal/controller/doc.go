// Package controller is `sluice serve`: reconcilers of Sluice's custom
// resources over the engines the command line uses. A ManifestSync is
// hydrated (in batches per destination branch: one commit for all the
// syncs of a branch that are due), an Image built, a RepoConfig's
// resources reconciled; each status says what was done, in the
// conditions kstatus and Flux users know, with Events for commits,
// failures and locks. Credentials come from the Secrets the resources
// name, never from the controller's environment.
package controller
