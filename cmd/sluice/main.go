// Command sluice renders GitOps sources into deploy repositories, every
// image pinned to a digest. See `sluice --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	// Mozilla's roots, for a system that has none: the release's image
	// carries nothing but the binaries.
	_ "golang.org/x/crypto/x509roots/fallback"

	"sluice.dev/sluice/internal/sandbox"
)

func main() {
	// A render worker of this binary's own (package sandbox) starts as one.
	if sandbox.IsWorker(os.Args) {
		os.Exit(sandbox.WorkerMain(os.Args))
	}
	// SLUICE_CPUPROFILE=file writes a CPU profile of the run: a
	// developer's aid for the benchmarks.
	if p := os.Getenv("SLUICE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if p := os.Getenv("SLUICE_TRACE"); p != "" {
		if f, err := os.Create(p); err == nil {
			trace.Start(f)
			defer trace.Stop()
		}
	}
	// Sluice's runs are short and their heaps mostly small: trading some
	// memory for a quarter of the collections keeps hydration CPU-bound on
	// real work. A soft limit keeps the trade from growing with the heap:
	// a render of kubeflow's size then runs at kustomize's peak memory,
	// not five times the live heap. GOGC and GOMEMLIMIT override both.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(256 << 20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		trace.Stop()
		os.Exit(code)
	}
}
