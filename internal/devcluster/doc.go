// Package devcluster runs a real Kubernetes control plane (kube-apiserver
// and etcd, built from the Go module proxy) on this machine, with the Flux
// and Argo CD CRDs installed from those projects' own Go modules: the
// cluster tests run against, and the one `sluice dev cluster` starts for a
// person to try `sluice apply`, `diff` and `run` on.
package devcluster
