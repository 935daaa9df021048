// Package controller is `sluice serve`: reconcilers of Sluice's custom
// resources over the engines the command line uses. A ManifestSync is
// hydrated (in batches per destination branch: one commit for all the
// syncs of a branch that are due), an Image built, a RepoConfig's
// resources reconciled; each status says what was done, in the
// conditions kstatus and Flux users know, with Events for commits,
// failures and locks.
//
// It is shared by teams who do not trust each other's repositories.
// Credentials come from the Secrets the resources name (for what a
// RepoConfig finds, those its spec.credentials lends), each sent only to
// the origin it is given for, never from the controller's environment;
// every connection made for a resource passes the egress policy
// (--allow-remote-hosts); every render, and every pull request template,
// runs in a worker process of its own (internal/sandbox), killed at its
// limits.
package controller
