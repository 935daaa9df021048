package takeover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/testenv"
)

// TestBareRepositoriesServeRepoConfigsImagesAndLocal: a bare repository
// on disk stands in for the code repository everywhere one is named: as
// a RepoConfig's repository, as --local REPO=PATH (so every sync and
// Image source reads it).
func TestBareRepositoriesServeRepoConfigsImagesAndLocal(t *testing.T) {
	f := testenv.NewPlatform(t)
	mirror := filepath.Join(t.TempDir(), "code.git")
	testenv.Git(t, "", "clone", "-q", "--bare", filepath.Join(f.Git.Root, "code.git"), mirror)
	// The RepoConfig reads the mirror, by path.
	rc := f.RepoConfig("rc.yaml", "")
	rcFile := strings.Replace(readFile(t, rc), "repo: "+f.CodeURL, "repo: "+mirror, 1)
	writeFile(t, rc, rcFile)
	o := options(f, rc)
	o.Local, o.Build, o.Tag, o.Owner, o.For = []string{f.CodeURL + "=" + mirror}, []string{"guestbook", "worker"}, "dev-bare", "bob@ci", time.Hour
	rep := take(t, o)
	if err := rep.Err(); err != nil {
		t.Fatalf("%v\n%+v", err, rep)
	}
	gb, _ := image(rep, "guestbook")
	if !gb.Built || !strings.Contains(gb.Source, mirror) || strings.HasSuffix(gb.Source, "+dirty") {
		t.Errorf("guestbook from the mirror: %+v", gb)
	}
	if r := sync(t, rep); !strings.Contains(r.Source, mirror) || !strings.Contains(r.Source, f.Code.Head()[:7]) {
		t.Errorf("sync read %s, not the mirror at %s", r.Source, f.Code.Head()[:7])
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
