# Sluice. `make test` builds what the tests need first (make tools: from
# the Go module proxy, once per machine into ~/.cache/sluice/tools, linked
# from bin/), so that no test's timeout includes a build; then runs every
# test. Measured on 2 cores from a fresh clone with empty caches: 55m04s
# (41m56s of it make tools); a later run 685 s (BENCHMARKS.md).
GO ?= go

.PHONY: all build tools generate test bench quickstart cluster clean image release-snapshot release-check

all: build

# sluice and its render worker, sluice-render, built together: one build
# identity linked into both, by which sluice knows the worker beside it
# is its own (package sandbox; otherwise it re-executes itself).
BUILD_ID := $(shell date +%s%N)
LINK_ID = -X sluice.dev/sluice/internal/sandbox.build=$(BUILD_ID)

build:
	$(GO) build -ldflags "$(LINK_ID)" -o bin/ ./cmd/sluice ./cmd/sluice-render

# What the tests need (hack/tools.sh): the control plane
# (kube-apiserver, etcd, kube-controller-manager), the helm and
# kustomize releases Sluice is compared with, the sops CLI tests encrypt
# with (and Local KMS, an AWS KMS API they encrypt for, and HashiCorp
# Vault's dev server, whose transit keys they encrypt with), the cosign
# and Notation CLIs tests sign images with (and Fulcio, a timestamp
# authority and Rekor over Trillian and Debian's MariaDB, for keyless
# signing), the Flux controllers and Argo CD's ApplicationSet
# controller, application controller and repo-server (with Debian's
# redis-server) live sessions hand clusters back to, Argo CD's own
# manifest generation renders as an Application are compared with, Gitea
# (a real forge sending webhooks), promtool (the alerts checked),
# Sluice's own image binary, and Debian's chromium for the dashboard's
# browser tests (installed with apt-get when missing). Built once per
# machine into ~/.cache/sluice/tools (SLUICE_TOOLS_CACHE), which bin/
# links to, two at a time (TOOLS_JOBS); each tool's time is printed.
tools:
	hack/tools.sh

# The static binaries of Sluice's own image (config/image/sluice.yaml):
# sluice and its render worker, built together.
.PHONY: bin/image/sluice
bin/image/sluice:
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags "$(LINK_ID)" -o bin/image/ ./cmd/sluice ./cmd/sluice-render

# Sluice's own image, by Sluice's own builder: make image REGISTRY=...
image: bin/image/sluice
	$(GO) run ./cmd/sluice build -f config/image/sluice.yaml

# The DeepCopy methods and the CRDs, from the types in api/v1alpha1, and
# the controller's ClusterRole from its rbac markers, with the Helm
# chart's copies of both, and of the monitoring rules and dashboard (tests fail when they are not up to date). RunConfig is a file of the
# command line, not a resource of the cluster: its schema goes to
# config/crd/files for the API reference, not into the install.
generate:
	$$(hack/controller-gen/build.sh) object paths=./api/...
	$$(hack/controller-gen/build.sh) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	mv config/crd/bases/sluice.dev_runconfigs.yaml config/crd/files/
	$$(hack/controller-gen/build.sh) rbac:roleName=sluice-controller paths=./internal/controller/... output:rbac:artifacts:config=config/rbac
	rm -f charts/sluice/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/sluice/files/crds/
	cp config/rbac/role.yaml charts/sluice/files/role.yaml
	{ printf 'apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: sluice-controller\nspec:\n'; grep -v '^#' config/monitoring/rules.yaml | sed 's/^/  /'; } > config/monitoring/prometheusrule.yaml
	mkdir -p charts/sluice/files/monitoring
	cp config/monitoring/rules.yaml config/monitoring/dashboard.json charts/sluice/files/monitoring/

# A release of the work tree, as the release workflow makes one
# (.github/workflows/release.yaml) but with nothing outside: the
# binaries, archives, sums and SBOMs of RELEASE_PLATFORMS in dist/, the
# image pushed to a registry in the process and kept with its signature as
# an OCI layout (dist/image), signed by a key made for the run
# (dist/cosign.pub). The tests of internal/release check it with the real
# cosign. make test builds this machine's platform only: every check
# there is made of each platform built, and each other platform is a
# cross-compile of the whole of Sluice's dependencies (minutes, cold, on
# 2 cores); make release-check builds every platform a release has, as
# the release workflow does before it publishes, and runs those tests.
RELEASE_PLATFORMS ?= $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
release-snapshot:
	rm -rf dist
	$(GO) run ./hack/release -snapshot -out dist -platforms "$(RELEASE_PLATFORMS)" -cosign $$(hack/cosign/build.sh) -sbom $$(hack/cyclonedx-gomod/build.sh) -helm $$(hack/helm/build.sh)

release-check: tools
	$(MAKE) release-snapshot RELEASE_PLATFORMS=
	$(GO) test -count=1 ./internal/release

test: tools release-snapshot
	$(GO) vet ./...
	$(GO) test ./...

bench: tools
	$(GO) run ./bench hydrate
	$(GO) run ./bench render
	$(GO) run ./bench apply
	$(GO) run ./bench run
	$(GO) run ./bench takeover
	$(GO) run ./bench serve
	$(GO) run ./bench dashboard

quickstart:
	$(GO) run ./cmd/sluice hydrate -f examples/quickstart

clean:
	rm -rf bin dist examples/quickstart/.out

cluster:
	$(GO) run ./cmd/sluice dev cluster
