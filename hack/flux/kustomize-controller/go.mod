// The kustomize-controller release the session tests hand clusters back to, built from
// the Go module proxy by hack/flux/build.sh (its own module, so its
// dependencies stay out of Sluice's go.mod).
module sluice.dev/sluice/hack/flux/kustomize-controller

go 1.26.0

require (
	github.com/fluxcd/kustomize-controller v1.9.6
	github.com/fluxcd/kustomize-controller/api v1.9.6
)

replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be
replace sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
replace sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
replace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1
