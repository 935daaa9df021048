//go:build tools

// Package apiserver pins k8s.io/kubernetes so that `go build
// k8s.io/kubernetes/cmd/kube-apiserver` (and kube-controller-manager)
// builds the upstream binaries from the Go module proxy. It is its own
// module so that the Kubernetes dependency graph never reaches Sluice's
// go.mod.
package apiserver

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)
