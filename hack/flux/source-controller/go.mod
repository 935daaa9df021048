// The source-controller release the session tests hand clusters back to, built from
// the Go module proxy by hack/flux/build.sh (its own module, so its
// dependencies stay out of Sluice's go.mod).
module sluice.dev/sluice/hack/flux/source-controller

go 1.26.0

require (
	github.com/fluxcd/source-controller v1.9.6
	github.com/fluxcd/source-controller/api v1.9.6
)

replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be
replace github.com/fluxcd/pkg/artifact => github.com/fluxcd/pkg/artifact v0.18.1
