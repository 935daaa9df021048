// Package cluster applies sets of objects to a Kubernetes cluster and
// reports what that did: server-side apply under the field manager
// "sluice", CRDs and Namespaces first, an ApplySet inventory (KEP-3659) so
// the next apply prunes what the set no longer has, diffs from a
// server-side dry run, and readiness from kstatus. It builds on
// github.com/fluxcd/pkg/ssa.
package cluster
