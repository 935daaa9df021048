# Sluice. `make test` builds what the tests need first (kube-apiserver and
# etcd, and the reference helm binary, from the Go module proxy, into
# bin/), so that no test's timeout includes a build; then runs every test.
GO ?= go

.PHONY: all build tools test bench quickstart cluster clean

all: build

build:
	$(GO) build -o bin/sluice ./cmd/sluice

# What the tests need, built once into bin/ (about 12 minutes cold): the
# control plane, and the helm and kustomize releases Sluice is compared
# with.
tools:
	hack/kube/build.sh >/dev/null
	hack/helm/build.sh >/dev/null
	hack/kustomize/build.sh >/dev/null

test: tools
	$(GO) vet ./...
	$(GO) test ./...

bench: tools
	$(GO) run ./bench hydrate
	$(GO) run ./bench render
	$(GO) run ./bench apply
	$(GO) run ./bench run
	$(GO) run ./bench takeover

quickstart:
	$(GO) run ./cmd/sluice hydrate -f examples/quickstart

clean:
	rm -rf bin examples/quickstart/.out

cluster:
	$(GO) run ./cmd/sluice dev cluster
