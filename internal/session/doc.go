// Package session runs live dev sessions against a cluster: a local
// directory rendered and applied on every save, the GitOps objects that own
// the workload (Flux Kustomizations and HelmReleases, Argo CD Applications)
// suspended meanwhile, and, when the session ends, everything it changed
// put back and handed back to GitOps.
//
// Nothing is installed in the cluster. Each session keeps, in the namespace
// sluice-system, a Lease its process renews and a record (compressed, split
// over Secrets when large) of every object it created, the prior state of
// every object it modified or deleted, and the prior settings of every
// owner it suspended. Whoever restores a session (the session itself on
// Ctrl+C, `sluice run stop` from another terminal, `sluice run cleanup`
// after a crash) works from that record alone, and restoring is idempotent:
// interrupted at any point, running it again finishes the job.
package session
