// The helm-controller release the session tests hand clusters back to, built from
// the Go module proxy by hack/flux/build.sh (its own module, so its
// dependencies stay out of Sluice's go.mod).
module sluice.dev/sluice/hack/flux/helm-controller

go 1.26.0

require (
	github.com/fluxcd/helm-controller v1.6.4
	github.com/fluxcd/helm-controller/api v1.6.4
)

replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20231025023718-d50d2fec9c98
replace sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
replace sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
