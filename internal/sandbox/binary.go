package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// WorkerBinary is the name of the render worker's own binary
// (cmd/sluice-render), installed beside sluice: it links what renders and
// not the controller, the clients and the CLI, so a worker starts in about
// two thirds of the time and memory of sluice re-executed.
const WorkerBinary = "sluice-render"

// build is the identity of one build of both binaries, set at link time
// (-X sluice.dev/sluice/internal/sandbox.build=...) by `make build` and
// the image, which build them together.
var build string

// identityArg, after WorkerArg, asks a worker binary for its identity.
const identityArg = "--identity"

// Identity says which build of Sluice's source this binary is, or ""
// when that cannot be told: built together by `make build` or the image
// (the identity linked in), installed from a module version (`go install
// sluice.dev/sluice/cmd/...@v1.2.3`), or built from a clean git checkout
// at a commit. A build of a modified tree has none: it pairs with no
// other binary.
func Identity() string {
	if build != "" {
		return runtime.Version() + " build " + build
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return identity(bi)
}

// identity is the identity a build's information tells.
func identity(bi *debug.BuildInfo) string {
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return bi.GoVersion + " " + bi.Main.Path + "@" + v
	}
	if rev := set["vcs.revision"]; rev != "" && set["vcs.modified"] == "false" {
		return bi.GoVersion + " " + bi.Main.Path + " " + rev
	}
	return ""
}

// WorkerMain is a render worker's main (args are os.Args, the first
// after the program WorkerArg): it serves one render on stdin and
// stdout, or, asked --identity, prints the binary's Identity.
func WorkerMain(args []string) int {
	if len(args) > 2 && args[2] == identityArg {
		fmt.Println(Identity())
		return 0
	}
	return Serve(os.Stdin, os.Stdout)
}

// workerCommand is how this binary starts render workers: the worker
// binary beside it when both are the same build, else itself with
// WorkerArg; why says why not the worker binary ("" when it is used).
func workerCommand() (command []string, why string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("finding this binary to run render workers: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, "", fmt.Errorf("finding this binary to run render workers: %w", err)
	}
	command, why = pairWorker(exe, Identity())
	return command, why, nil
}

// pairWorker chooses the workers of the binary exe, whose identity is
// mine: the worker binary beside it when it is the same build (asked
// once, at the Sandbox's start), else exe re-executed, and why.
func pairWorker(exe, mine string) (command []string, why string) {
	self := []string{exe, WorkerArg}
	sibling := filepath.Join(filepath.Dir(exe), WorkerBinary)
	if _, err := os.Stat(sibling); err != nil {
		return self, fmt.Sprintf("no %s beside %s (make build or go install ./cmd/... installs it)", WorkerBinary, exe)
	}
	if mine == "" {
		return self, fmt.Sprintf("%s is a build of a modified tree: it cannot tell whether %s beside it is the same build (make build links both together)", exe, WorkerBinary)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sibling, WorkerArg, identityArg).Output()
	if err != nil {
		return self, fmt.Sprintf("asking %s which build it is: %v", sibling, err)
	}
	if other := strings.TrimSpace(string(out)); other != mine {
		return self, fmt.Sprintf("%s is another build than %s (%q, not %q): build or install both together", sibling, exe, other, mine)
	}
	return []string{sibling, WorkerArg}, ""
}
