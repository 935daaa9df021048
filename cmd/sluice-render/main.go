// Command sluice-render is Sluice's render worker: `sluice hydrate` and
// `sluice serve` start one per render, confined and limited (package
// sandbox), when it is installed beside sluice from the same build
// (`make build`, `go install ./cmd/...` of a release, the image). It links
// only what renders, so it starts faster and smaller than sluice
// re-executed, which stands in for it otherwise. It is not run by hand.
package main

import (
	"os"

	"sluice.dev/sluice/internal/sandbox"
)

func main() { os.Exit(sandbox.WorkerMain(os.Args)) }
