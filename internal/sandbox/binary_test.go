package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func TestABuildIsKnownByWhatMakesItOne(t *testing.T) {
	info := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "sluice.dev/sluice", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, tt := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"a release installed from the module proxy", info("v1.2.3"), "go1.26.8 sluice.dev/sluice@v1.2.3"},
		{"a clean checkout", info("(devel)", "vcs.revision", "abc123", "vcs.modified", "false"), "go1.26.8 sluice.dev/sluice abc123"},
		{"a modified checkout", info("(devel)", "vcs.revision", "abc123", "vcs.modified", "true"), ""},
		{"a tree outside git", info("(devel)"), ""},
	} {
		if got := identity(tt.bi); got != tt.want {
			t.Errorf("%s: identity %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A sluice binary uses the worker binary beside it only when both are
// one build: the pair `make tools` builds together (bin/image), and not a
// worker binary of another build, a missing one, or beside a binary
// whose build cannot be told.
func TestSluiceStartsTheWorkerBinaryOfItsOwnBuildOnly(t *testing.T) {
	exe := testenv.ImageBinary(t)
	pair := filepath.Join(filepath.Dir(exe), WorkerBinary)
	if _, err := os.Stat(pair); err != nil {
		t.Fatalf("%s is not built: run `make tools` (make bin/image/sluice builds both); `make test` does", pair)
	}
	out, err := exec.Command(exe, WorkerArg, identityArg).Output()
	mine := strings.TrimSpace(string(out))
	if err != nil || !strings.Contains(mine, " build ") {
		t.Fatalf("%s says it is build %q (%v), want the identity make linked in", exe, mine, err)
	}
	if cmd, why := pairWorker(exe, mine); len(cmd) != 2 || cmd[0] != pair || why != "" {
		t.Errorf("the pair built together: %v (%s)", cmd, why)
	}

	// The same sluice without a worker binary, then beside one of
	// another build (this test's own binary stands for one).
	dir := t.TempDir()
	alone := filepath.Join(dir, "sluice")
	copyFile(t, exe, alone)
	if cmd, why := pairWorker(alone, mine); cmd[0] != alone || !strings.Contains(why, "no sluice-render beside") {
		t.Errorf("no worker binary: %v (%s)", cmd, why)
	}
	copyFile(t, os.Args[0], filepath.Join(dir, WorkerBinary))
	if cmd, why := pairWorker(alone, mine); cmd[0] != alone || cmd[1] != WorkerArg || !strings.Contains(why, "is another build") {
		t.Errorf("a worker binary of another build: %v (%s)", cmd, why)
	}
	// A binary whose build cannot be told trusts no worker binary.
	if cmd, why := pairWorker(exe, ""); cmd[0] != exe || !strings.Contains(why, "modified tree") {
		t.Errorf("a build of unknown identity: %v (%s)", cmd, why)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
