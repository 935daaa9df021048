package hydrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAFolderAnotherSyncOwnsIsRefusedAcrossRuns: runs of separate files
// cannot see each other's syncs; the provenance records in the branch
// say whose each folder is.
func TestAFolderAnotherSyncOwnsIsRefusedAcrossRuns(t *testing.T) {
	f := newFixture(t)
	write := func(name, path string) {
		f.sync(name, strings.NewReplacer("NAME", name, "PATH", path).Replace(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: NAME}
spec:
  source: {repo: APP, ref: main, path: deploy/overlays/dev}
  destination: {repo: DST, branch: env/dev, path: PATH}
`))
	}
	write("owner", "apps/ov")
	if r := f.result(f.run(), "owner"); r.Result != Committed {
		t.Fatalf("owner: %s %s", r.Result, r.Error)
	}
	tip := f.dstGit("rev-parse", "env/dev")
	for _, tt := range []struct{ name, path, want string }{
		{"inner", "apps/ov/sub", "apps/ov/sub is inside apps/ov, the folder of ManifestSync owner"},
		{"outer", "apps", "apps holds apps/ov, the folder of ManifestSync owner"},
		{"same", "apps/ov", "apps/ov is the folder of ManifestSync owner"},
	} {
		os.Remove(filepath.Join(f.syncDir, "owner.yaml"))
		os.Remove(filepath.Join(f.syncDir, "inner.yaml"))
		os.Remove(filepath.Join(f.syncDir, "outer.yaml"))
		os.Remove(filepath.Join(f.syncDir, "same.yaml"))
		write(tt.name, tt.path)
		r := f.result(f.run(), tt.name)
		if r.Result != Failed || !strings.Contains(r.Error, tt.want) {
			t.Errorf("%s: %s %q, want %q", tt.name, r.Result, r.Error, tt.want)
		}
	}
	if got := f.dstGit("rev-parse", "env/dev"); got != tip {
		t.Errorf("the branch moved: %s -> %s", tip, got)
	}
	// The owner itself goes on as before.
	os.Remove(filepath.Join(f.syncDir, "same.yaml"))
	write("owner", "apps/ov")
	if r := f.result(f.run(), "owner"); r.Result != Unchanged {
		t.Errorf("owner again: %s %s", r.Result, r.Error)
	}
}
