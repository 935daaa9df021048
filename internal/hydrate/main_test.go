package hydrate

import (
	"os"
	"testing"

	"sluice.dev/sluice/internal/sandbox"
)

// TestMain makes the test binary a render worker when a Sandbox of the
// tests starts it.
func TestMain(m *testing.M) {
	if sandbox.IsWorker(os.Args) {
		os.Exit(sandbox.WorkerMain(os.Args))
	}
	os.Exit(m.Run())
}

// testSandbox renders in worker processes of this test binary.
func testSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.New(sandbox.Options{Command: []string{os.Args[0], sandbox.WorkerArg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
