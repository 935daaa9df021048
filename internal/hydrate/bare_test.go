package hydrate

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBareRepositoriesAreSourcesLikeAnyRemote: a bare repository on disk
// (a mirror on a shared disk) named by its path or a file:// URL is read
// at its HEAD or a ref, as a remote would be.
func TestBareRepositoriesAreSourcesLikeAnyRemote(t *testing.T) {
	f := newFixture(t)
	bare := filepath.Join(f.git.Root, "app.git") // the server's own bare repository
	for name, repo := range map[string]string{"by-path": bare, "by-url": "file://" + bare, "by-path-and-ref": bare + "?ref=main"} {
		f.sync(name, strings.NewReplacer("NAME", name, "BARE", repo).Replace(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: NAME}
spec:
  source: {repo: "BARE", path: deploy/overlays/dev}
  destination: {repo: DST, branch: env/bare, path: apps/NAME}
`))
	}
	rep := f.run()
	for _, r := range rep.Results {
		if r.Result != Committed {
			t.Errorf("%s: %s %s", r.Name, r.Result, r.Error)
			continue
		}
		if !strings.Contains(r.Source, "@"+f.app.Head()[:7]) {
			t.Errorf("%s read %s, not the bare repository's HEAD %s", r.Name, r.Source, f.app.Head()[:7])
		}
	}
	if got := f.dstGit("show", "env/bare:apps/by-url/deployment-web.yaml"); !strings.Contains(got, "namespace: dev") {
		t.Errorf("by-url:\n%s", got)
	}
}
