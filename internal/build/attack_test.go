package build

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// layerNames lists the files of an image's last layer.
func layerNames(t *testing.T, ref string) []string {
	t.Helper()
	r, _ := name.ParseReference(ref, name.Insecure)
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, _ := layers[len(layers)-1].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			out = append(out, h.Name)
		}
	}
	sort.Strings(out)
	return out
}

func TestWorkingTreeImagesShipNeitherGitNorIgnoredFiles(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	f.work.Write(map[string]string{
		".gitignore":                     "node_modules/\nbin/\n",
		"web/.sluiceignore":              "*.map\n",
		"node_modules/left-pad/index.js": "module.exports = 1\n",
		"web/static/app.js.map":          "{}\n",
	})
	testenv.Git(t, f.work.Dir, "remote", "add", "origin", "https://sluice-bot:s3cret-token@git.example.com/team/app.git")
	img := f.image(t, "everything", "")
	img.Spec.Source[0].Mappings = []v1alpha1.Mapping{{Src: "**", Dest: "/src"}, {Src: "bin/guestbook", Dest: "/app/guestbook"}}
	r := build1(t, f.b, img, Options{})
	got := layerNames(t, r.Ref())
	want := []string{".gitignore", "README.md", "web/.sluiceignore", "web/static/css/a.css", "web/static/index.html"}
	for i := range want {
		want[i] = "src/" + want[i]
	}
	want = append([]string{"app/guestbook"}, want...)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestImageDestinationsMustNameFiles(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	img := f.image(t, "root", "")
	img.Spec.Source[0].Mappings = []v1alpha1.Mapping{{Src: "README.md", Dest: "/"}}
	res := f.b.Build(context.Background(), []config.Image{img}, Options{})[0]
	if res.Err == nil || !strings.Contains(res.Err.Error(), "README.md would be written as / in the image") {
		t.Errorf("dest /: %v", res.Err)
	}
	p := filepath.Join(f.files, "dotdot.yaml")
	os.WriteFile(p, []byte("apiVersion: sluice.dev/v1alpha1\nkind: Image\nmetadata: {name: d}\nspec:\n  image: r.example.com/x\n  base: scratch\n  source: [{repo: ., mappings: [{src: a, dest: /app/../../etc/passwd}]}]\n"), 0o644)
	if _, err := config.Load(p); err == nil || !strings.Contains(err.Error(), "must not hold ..") {
		t.Errorf("dest with ..: %v", err)
	}
}

// TestExternalBuilderRefusesATreeThatClimbsOut: a tree object with an
// entry named "..", which no git client writes but a hostile server can
// serve, is refused before the builder's checkout writes anything.
func TestExternalBuilderRefusesATreeThatClimbsOut(t *testing.T) {
	f := newFixture(t)
	repoDir := t.TempDir()
	testenv.Git(t, repoDir, "init", "-q", "--bare", "--initial-branch=main", ".")
	repo, err := source.NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, repoDir), source.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := repo.WriteBlob([]byte("pwned\n"))
	inner, _ := repo.WriteTree([]object.TreeEntry{{Name: "evil", Mode: filemode.Regular, Hash: blob}})
	root, _ := repo.WriteTree([]object.TreeEntry{{Name: "..", Mode: filemode.Dir, Hash: inner}, {Name: "Dockerfile", Mode: filemode.Regular, Hash: blob}})
	commit, _ := repo.WriteCommit(&object.Commit{Message: "climb", TreeHash: root, Author: object.Signature{Name: "x"}, Committer: object.Signature{Name: "x"}})
	if err := repo.UpdateBranch(context.Background(), "main", commit, plumbing.ZeroHash, source.UpdateBranchOptions{}); err != nil {
		t.Fatal(err)
	}
	img := f.image(t, "climb", "  builder: {command: [\"true\"]}\n")
	img.Spec.Source[0].Repo, img.Spec.Source[0].Ref = repoDir, "main"
	img.Spec.Source[0].Mappings = nil
	// A private temporary directory: other packages' tests share /tmp
	// and would be counted as left by this checkout.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	before, _ := os.ReadDir(tmp)
	res := f.b.Build(context.Background(), []config.Image{img}, Options{})[0]
	if res.Err == nil || !strings.Contains(res.Err.Error(), `entry named ".."`) {
		t.Fatalf("a tree with ..: %v", res.Err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "evil")); err == nil {
		t.Error("the checkout wrote outside its directory")
	}
	after, _ := os.ReadDir(tmp)
	if len(after) > len(before) {
		t.Errorf("the refused checkout left %d entries in %s", len(after)-len(before), tmp)
	}
}

func mustLoc(t *testing.T, p string) source.Location {
	t.Helper()
	l, err := source.ParseLocation(p, "")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestImageMappingsFollowNoLinkOutOfTheSource(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "id_rsa"), []byte("-----BEGIN stolen-----\n"), 0o600)
	f.work.Link(map[string]string{"bin/passwd": "/etc/passwd", "keys": outside, "web/static/leak": "../../../" + filepath.Base(outside)})
	for _, tt := range []struct{ src, want string }{
		{"bin/passwd", `bin/passwd is a symbolic link to "/etc/passwd"`},
		{"keys/**", `keys is a symbolic link to "` + outside + `"`},
		{"keys/id_rsa", `symbolic link keys points to "` + outside + `"`},
	} {
		img := f.image(t, "leak", "")
		img.Spec.Source[0].Mappings = []v1alpha1.Mapping{{Src: tt.src, Dest: "/x"}}
		res := f.b.Build(context.Background(), []config.Image{img}, Options{})[0]
		if res.Err == nil || !strings.Contains(res.Err.Error(), tt.want) || strings.Contains(res.Err.Error(), "stolen") {
			t.Errorf("%s: %v, want %q", tt.src, res.Err, tt.want)
		}
	}
}
