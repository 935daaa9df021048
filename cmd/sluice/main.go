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
)

func main() {
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
	// Sluice's runs are short and its heap small: trading some memory for
	// a quarter of the collections keeps hydration CPU-bound on real work.
	debug.SetGCPercent(400)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Args[1:])
	stop()
	if code != 0 {
		pprof.StopCPUProfile()
		trace.Stop()
		os.Exit(code)
	}
}
