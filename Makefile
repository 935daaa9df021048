# Sluice. `make test` builds whatever the tests need (kube-apiserver and
# etcd, from the Go module proxy, into bin/), then runs every test.
GO ?= go

.PHONY: all build test bench quickstart cluster clean

all: build

build:
	$(GO) build -o bin/sluice ./cmd/sluice

test:
	$(GO) vet ./...
	$(GO) test ./...

bench:
	$(GO) run ./bench hydrate
	$(GO) run ./bench apply
	$(GO) run ./bench run
	$(GO) run ./bench takeover

quickstart:
	$(GO) run ./cmd/sluice hydrate -f examples/quickstart

clean:
	rm -rf bin examples/quickstart/.out

cluster:
	$(GO) run ./cmd/sluice dev cluster
