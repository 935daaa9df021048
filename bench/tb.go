package main

import (
	"fmt"
	"os"
)

// benchTB lets the test helpers run outside `go test`.
type benchTB struct {
	root     string
	cleanups []func()
	keep     bool
	n        int
}

func newTB() *benchTB {
	root, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		panic(err)
	}
	return &benchTB{root: root}
}

func (b *benchTB) Helper() {}

func (b *benchTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	b.cleanup()
	os.Exit(1)
}

func (b *benchTB) Cleanup(f func()) { b.cleanups = append(b.cleanups, f) }

func (b *benchTB) TempDir() string {
	b.n++
	d := fmt.Sprintf("%s/%03d", b.root, b.n)
	if err := os.MkdirAll(d, 0o755); err != nil {
		b.Fatalf("%v", err)
	}
	return d
}

func (b *benchTB) cleanup() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	b.cleanups = nil
	if b.keep {
		fmt.Fprintln(os.Stderr, "bench: kept", b.root)
		return
	}
	os.RemoveAll(b.root)
}
