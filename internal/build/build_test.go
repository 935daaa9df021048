package build

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// TestMain lets the test binary act as an external builder: with
// SLUICE_TEST_BUILDER=1 it pushes a small image to $IMAGE.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_TEST_BUILDER") == "1" {
		ref, err := name.ParseReference(os.Getenv("IMAGE"), name.Insecure)
		if err == nil {
			var img v1.Image
			if img, err = random.Image(64, 1); err == nil {
				err = remote.Write(ref, img)
			}
		}
		if err != nil {
			os.Stderr.WriteString("builder: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type fixture struct {
	reg   *testenv.Registry
	work  *testenv.Work
	b     *Builder
	files string // a directory for Image files
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: testenv.NewRegistry(t), work: testenv.NewWork(t, ""), files: t.TempDir()}
	f.work.Write(map[string]string{
		"bin/guestbook":         "#!/bin/sh\necho guestbook\n",
		"web/static/index.html": "<h1>hi</h1>\n",
		"web/static/css/a.css":  "body{}\n",
		"README.md":             "not in the image\n",
	})
	os.Chmod(filepath.Join(f.work.Dir, "bin/guestbook"), 0o755)
	f.work.Commit("app")
	f.b = &Builder{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}
	return f
}

// image writes an Image file and loads it.
func (f *fixture) image(t *testing.T, name, extra string) config.Image {
	t.Helper()
	base := f.reg.Host + "/base/static:latest"
	y := `apiVersion: sluice.dev/v1alpha1
kind: Image
metadata: {name: ` + name + `}
spec:
  image: ` + f.reg.Host + `/team/` + name + `
  base: ` + base + `
  source:
  - repo: ` + f.work.Dir + `
    mappings:
    - {src: bin/guestbook, dest: /app/guestbook}
    - {src: "web/static/**", dest: /app/static, strip: web/static}
  config: {entrypoint: [/app/guestbook], env: {PORT: "8080"}, workingDir: /app, user: "65532"}
` + extra
	p := filepath.Join(f.files, name+".yaml")
	os.WriteFile(p, []byte(y), 0o644)
	set, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return set.Images[0]
}

func (f *fixture) pushBase(t *testing.T) {
	t.Helper()
	img, _ := random.Image(512, 2)
	img, _ = mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/bin", "PORT=80"}})
	f.reg.PushImage(t, "base/static:latest", img)
}

func build1(t *testing.T, b *Builder, img config.Image, o Options) Result {
	t.Helper()
	r := b.Build(context.Background(), []config.Image{img}, o)[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r
}

func TestBuildIsReproducibleAndLaysOutTheFiles(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	img := f.image(t, "guestbook", "")
	first := build1(t, f.b, img, Options{})
	if !first.Built || first.Digest == "" || len(first.Tags) != 1 || first.Tags[0] != f.work.Head() {
		t.Fatalf("first build: %+v", first)
	}
	// The same inputs, built from scratch into another repository: the
	// same digest, byte for byte.
	other := f.image(t, "again", "")
	other.Spec.Image = f.reg.Host + "/elsewhere/guestbook"
	second := build1(t, &Builder{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}, other, Options{})
	if !second.Built || second.Digest != first.Digest {
		t.Fatalf("a second build of the same inputs: %s vs %s (built %v)", second.Digest, first.Digest, second.Built)
	}

	ref, _ := name.ParseReference(first.Ref(), name.Insecure)
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := pulled.ConfigFile()
	if !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/app/guestbook"}) || cf.Config.WorkingDir != "/app" || cf.Config.User != "65532" ||
		!reflect.DeepEqual(cf.Config.Env, []string{"PATH=/usr/bin", "PORT=8080"}) || cf.Config.Labels[LabelInputs] != first.Inputs {
		t.Errorf("config: %+v", cf.Config)
	}
	layers, _ := pulled.Layers()
	rc, _ := layers[len(layers)-1].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v owner %d:%d", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		got = append(got, h.Name+" "+os.FileMode(h.Mode).String())
	}
	want := []string{"app/ -rwxr-xr-x", "app/guestbook -rwxr-xr-x", "app/static/ -rwxr-xr-x", "app/static/css/ -rwxr-xr-x", "app/static/css/a.css -rw-r--r--", "app/static/index.html -rw-r--r--"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnchangedInputsAreOnlyTagged(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	img := f.image(t, "guestbook", "  tags: [sourceCommit, stable]\n")
	first := build1(t, f.b, img, Options{})
	// A commit that does not touch the mapped files: nothing is built or
	// uploaded; the new commit's tag points at the same image.
	f.work.Write(map[string]string{"README.md": "changed\n"})
	commit := f.work.Commit("docs")
	uploads := f.reg.Uploads.Load()
	b := &Builder{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}
	again := build1(t, b, img, Options{Tags: []string{"dev-alice"}})
	if again.Built || again.Digest != first.Digest || f.reg.Uploads.Load() != uploads {
		t.Fatalf("rebuilt: built %v, %d uploads, %s vs %s", again.Built, f.reg.Uploads.Load()-uploads, again.Digest, first.Digest)
	}
	if !reflect.DeepEqual(again.Tags, []string{commit, "stable", "dev-alice"}) {
		t.Errorf("tags %v", again.Tags)
	}
	for _, tag := range again.Tags {
		if d, err := b.Registry.Digest(context.Background(), img.Spec.Image+":"+tag); err != nil || d != first.Digest {
			t.Errorf("%s -> %s, %v", tag, d, err)
		}
	}
	// A change to a mapped file builds anew, uploading that one layer (and
	// the config).
	f.work.Write(map[string]string{"web/static/index.html": "<h1>new</h1>\n"})
	f.work.Commit("new page")
	uploads = f.reg.Uploads.Load()
	changed := build1(t, &Builder{Cache: source.NewCache(t.TempDir()), Registry: registry.New()}, img, Options{})
	if !changed.Built || changed.Digest == first.Digest || f.reg.Uploads.Load()-uploads != 2 {
		t.Errorf("after a change: built %v, %d uploads", changed.Built, f.reg.Uploads.Load()-uploads)
	}
}

func TestDirtyWorkingTreesAreBuiltButNotTaggedWithTheirCommit(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	f.work.Write(map[string]string{"bin/guestbook": "#!/bin/sh\necho edited\n"})
	r := build1(t, f.b, f.image(t, "guestbook", ""), Options{Tags: []string{"dev-alice"}})
	if !strings.HasSuffix(r.Source, "+dirty") || !reflect.DeepEqual(r.Tags, []string{"dev-alice"}) {
		t.Errorf("dirty build: %+v", r)
	}
}

func TestMultiPlatformBaseGivesAMultiPlatformImage(t *testing.T) {
	f := newFixture(t)
	var adds []mutate.IndexAddendum
	for _, arch := range []string{"amd64", "arm64"} {
		img, _ := random.Image(128, 1)
		img, _ = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: arch, RootFS: v1.RootFS{Type: "layers"}})
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	f.reg.PushIndex(t, "base/static:latest", mutate.AppendManifests(empty.Index, adds...))
	r := build1(t, f.b, f.image(t, "guestbook", ""), Options{})
	ref, _ := name.ParseReference(r.Ref(), name.Insecure)
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 2 {
		t.Fatalf("%d manifests", len(im.Manifests))
	}
	var diffIDs []v1.Hash
	for _, m := range im.Manifests {
		img, _ := idx.Image(m.Digest)
		cf, _ := img.ConfigFile()
		if cf.Architecture != m.Platform.Architecture || cf.Config.User != "65532" {
			t.Errorf("%s: config %+v", m.Platform, cf)
		}
		ls, _ := img.Layers()
		d, _ := ls[len(ls)-1].DiffID()
		diffIDs = append(diffIDs, d)
	}
	if diffIDs[0] != diffIDs[1] {
		t.Error("the platforms got different layers of the same files")
	}
}

func TestBadMappingsAndBasesNameTheField(t *testing.T) {
	f := newFixture(t)
	f.pushBase(t)
	img := f.image(t, "guestbook", "")
	img.Spec.Source[0].Mappings[1].Src = "web/missing/**"
	r := f.b.Build(context.Background(), []config.Image{img}, Options{})[0]
	if r.Err == nil || !strings.Contains(r.Err.Error(), `spec.source[0].mappings[1].src "web/missing/**" matches no file`) || !strings.Contains(r.Err.Error(), "Image guestbook (") {
		t.Errorf("no match: %v", r.Err)
	}
	img = f.image(t, "guestbook", "")
	img.Spec.Base = f.reg.Host + "/base/nothing:latest"
	r = f.b.Build(context.Background(), []config.Image{img}, Options{})[0]
	if r.Err == nil || !strings.Contains(r.Err.Error(), "spec.base") {
		t.Errorf("missing base: %v", r.Err)
	}
	// .. and absolute sources are refused when the file loads.
	p := filepath.Join(f.files, "bad.yaml")
	os.WriteFile(p, []byte("apiVersion: sluice.dev/v1alpha1\nkind: Image\nmetadata: {name: bad}\nspec:\n  image: r.example.com/x\n  base: scratch\n  source:\n  - repo: .\n    mappings:\n    - {src: ../secrets, dest: /x}\n    - {src: /etc/passwd, dest: /y}\n"), 0o644)
	_, err := config.Load(p)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml:10: Image bad: spec.source[0].mappings[0].src") || !strings.Contains(err.Error(), "bad.yaml:11: Image bad: spec.source[0].mappings[1].src") {
		t.Errorf("load: %v", err)
	}
}

func TestExternalBuilder(t *testing.T) {
	f := newFixture(t)
	img := f.image(t, "guestbook", "  builder: {command: [\""+os.Args[0]+"\"]}\n")
	f.b.Env = append(os.Environ(), "SLUICE_TEST_BUILDER=1")
	r := build1(t, f.b, img, Options{Tags: []string{"dev"}})
	if !r.Built || r.Digest == "" {
		t.Fatalf("%+v", r)
	}
	if d, err := f.b.Registry.Digest(context.Background(), img.Spec.Image+":dev"); err != nil || d != r.Digest {
		t.Errorf("dev -> %s %v", d, err)
	}
	// A builder that pushes nothing is an error that says so.
	f.b.Env = append(os.Environ(), "SLUICE_TEST_BUILDER=0")
	img.Spec.Builder.Command = []string{"true"}
	img.Spec.Config.User = "changed" // other inputs: not found as built
	res := f.b.Build(context.Background(), []config.Image{img}, Options{})[0]
	if res.Err == nil || !strings.Contains(res.Err.Error(), "was not pushed") {
		t.Errorf("a builder that pushed nothing: %v", res.Err)
	}
	_ = errors.New
}
