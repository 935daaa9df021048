package devcluster

import (
	"path/filepath"
	"testing"
)

// The source tree is found from any directory: from the working
// directory's when it is in one, else from the one the binary was built
// from (a build without -trimpath records it, as `go install ./cmd/...`
// and `go test` do).
func TestTheSourceTreeIsFoundFromAnyDirectory(t *testing.T) {
	want, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", t.TempDir(), "/"} {
		got, err := sourceRoot(dir)
		if err != nil || got != want {
			t.Errorf("from %q: %q, %v; want %q", dir, got, err, want)
		}
	}
}
