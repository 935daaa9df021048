package build

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/testenv"
)

// Sluice's own image, as config/image/sluice.yaml describes it: built
// from the static binary by this builder (its base replaced by one in the
// test registry), the binary in it runs.
func TestSluicesOwnImage(t *testing.T) {
	bin := testenv.ImageBinary(t)
	root, err := testenv.SourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	set, err := config.Load(filepath.Join(root, "config", "image", "sluice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	f.pushBase(t)
	img := set.Images[0]
	img.Spec.Image = f.reg.Host + "/sluice-dev/sluice"
	img.Spec.Base = f.reg.Host + "/base/static:latest"
	res := build1(t, f.b, img, Options{})
	if !res.Built || !containsTag(res.Tags, "latest") {
		t.Fatalf("build: %+v", res)
	}
	ref, _ := name.ParseReference(res.Ref(), name.Insecure)
	pulled, err := remote.Image(ref, remote.WithContext(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := pulled.ConfigFile()
	if !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/local/bin/sluice"}) || cf.Config.User != "65532:65532" {
		t.Errorf("config: %+v", cf.Config)
	}
	layers, _ := pulled.Layers()
	rc, _ := layers[len(layers)-1].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var got, worker []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Name {
		case "usr/local/bin/sluice", "usr/local/bin/sluice-render":
			if h.Mode&0o111 == 0 {
				t.Errorf("%s is not executable: %o", h.Name, h.Mode)
			}
			data, _ := io.ReadAll(tr)
			if h.Name == "usr/local/bin/sluice" {
				got = data
			} else {
				worker = data
			}
		}
	}
	want, _ := os.ReadFile(bin)
	if !bytes.Equal(got, want) {
		t.Fatalf("the image's /usr/local/bin/sluice (%d bytes) is not bin/image/sluice (%d bytes)", len(got), len(want))
	}
	dir := t.TempDir()
	run := filepath.Join(dir, "sluice")
	if err := os.WriteFile(run, got, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(run, "serve", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--watch-label-selector") {
		t.Fatalf("the image's binary: %v\n%s", err, out)
	}
	// Its render worker beside it, of the same build: sluice uses it.
	if err := os.WriteFile(filepath.Join(dir, sandbox.WorkerBinary), worker, 0o755); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range []string{run, filepath.Join(dir, sandbox.WorkerBinary)} {
		out, err := exec.Command(b, sandbox.WorkerArg, "--identity").Output()
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		ids = append(ids, strings.TrimSpace(string(out)))
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("the image's sluice and sluice-render are builds %q and %q: sluice would not use its worker binary", ids[0], ids[1])
	}
}

func containsTag(tags []string, tag string) bool {
	for _, t := range tags {
		if t == tag {
			return true
		}
	}
	return false
}
