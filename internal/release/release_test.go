package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/testenv"
)

// The snapshot release `make release-snapshot` makes (make test runs it
// before the tests): what a team downloads and what the cluster pulls,
// checked as they would check it.
func snapshot(t *testing.T) (string, *Manifest) {
	t.Helper()
	dir := os.Getenv("SLUICE_RELEASE_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "dist")
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("no snapshot release in %s: run make release-snapshot (make test does): %v", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return dir, &m
}

func TestTheReleaseHasEveryPlatformSummedAndDescribed(t *testing.T) {
	dir, m := snapshot(t)
	if len(m.Commit) != 40 || m.BuildID != BuildID(m.Version, m.Commit) {
		t.Fatalf("manifest: version %q commit %q build %q", m.Version, m.Commit, m.BuildID)
	}
	// The sums are the files'.
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(dir, ChecksumsName))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: %q is not a sha256sum line", ChecksumsName, sc.Text())
		}
		sums[file] = sum
	}
	f.Close()
	for file, sum := range sums {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: the sum does not match the file", file)
		}
	}
	// make test builds this machine's platform; make release-check and
	// a release, every one of Platforms (each check below is made of
	// every platform built).
	built := map[string]bool{}
	for _, a := range m.Artifacts {
		if a.Kind == "archive" {
			built[a.Platform] = true
		}
	}
	if host := runtime.GOOS + "/" + runtime.GOARCH; !built[host] {
		t.Errorf("the release has archives for %v: this machine's, %s, at least is wanted", built, host)
	}
	for _, p := range Platforms {
		if !built[p.String()] {
			t.Logf("%s: not built by this snapshot", p)
			continue
		}
		archive := ArchiveName(m.Version, p)
		if sums[archive] == "" {
			t.Errorf("%s: no archive (or no sum of it)", p)
			continue
		}
		bins := untar(t, filepath.Join(dir, archive))
		for _, b := range Binaries {
			data, ok := bins[b]
			if !ok {
				t.Errorf("%s: %s lacks %s", p, archive, b)
				continue
			}
			checkFormat(t, p, b, data)
			checkBuild(t, p, b, data)
			// The render worker is used only beside a sluice of its own
			// build: both carry the release's identity (-trimpath keeps
			// -ldflags out of the recorded settings; the string is there).
			if !bytes.Contains(data, []byte(m.BuildID)) {
				t.Errorf("%s: %s does not carry the build identity %q", p, b, m.BuildID)
			}
			sbom := SBOMName(m.Version, p, b)
			if sums[sbom] == "" {
				t.Errorf("%s: no SBOM of %s (or no sum of it)", p, b)
				continue
			}
			checkSBOM(t, filepath.Join(dir, sbom), b)
		}
		if _, ok := bins["LICENSE"]; !ok {
			t.Errorf("%s: %s carries no licence", p, archive)
		}
	}
}

func untar(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	out := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
	}
}

// checkFormat checks a binary is an executable of its platform.
func checkFormat(t *testing.T, p Platform, name string, data []byte) {
	t.Helper()
	switch p.OS {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s %s: not ELF: %v", p, name, err)
			return
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Arch]
		if f.Machine != want || f.Type != elf.ET_EXEC {
			t.Errorf("%s %s: ELF %s %s", p, name, f.Machine, f.Type)
		}
		if f.Section(".symtab") != nil {
			t.Errorf("%s %s: not stripped (a symbol table)", p, name)
		}
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s %s: not Mach-O: %v", p, name, err)
			return
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[p.Arch]
		if f.Cpu != want || f.Type != macho.TypeExec {
			t.Errorf("%s %s: Mach-O %s %s", p, name, f.Cpu, f.Type)
		}
	}
}

// checkBuild checks, from the settings Go records in a binary, that it
// was built for the platform, without cgo, with -trimpath and no VCS
// stamp (the version and commit are linked in).
func checkBuild(t *testing.T, p Platform, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name)
	os.WriteFile(tmp, data, 0o755)
	bi, err := buildinfo.ReadFile(tmp)
	if err != nil {
		t.Errorf("%s %s: %v", p, name, err)
		return
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if set["GOOS"] != p.OS || set["GOARCH"] != p.Arch || set["CGO_ENABLED"] != "0" || set["-trimpath"] != "true" || set["vcs"] != "" || set["vcs.revision"] != "" {
		t.Errorf("%s %s: built with %v", p, name, set)
	}
	// The image has no CA files: sluice carries Mozilla's roots.
	if name == "sluice" && !slices.ContainsFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
		t.Errorf("%s %s: links no fallback roots", p, name)
	}
}

func checkSBOM(t *testing.T, file, binary string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component struct{ Name, Version string } `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name, Version, Purl string
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if bom.BOMFormat != "CycloneDX" || !strings.Contains(bom.Metadata.Component.Name, "sluice.dev/sluice") || len(bom.Components) < 10 {
		t.Errorf("%s: format %q, of %q, %d components", file, bom.BOMFormat, bom.Metadata.Component.Name, len(bom.Components))
	}
	if !slices.ContainsFunc(bom.Components, func(c struct{ Name, Version, Purl string }) bool {
		return c.Name == "github.com/go-git/go-git/v5" && strings.HasPrefix(c.Purl, "pkg:golang/")
	}) {
		t.Errorf("%s: does not list go-git, which %s links", file, binary)
	}
}

// The image: every Linux platform of the release, the binaries of the release's
// archives, no shell, as a non-root user; signed by the release's key
// (the real cosign verifies it, and refuses another key).
func TestTheReleasesImageIsItsBinariesAndSigned(t *testing.T) {
	dir, m := snapshot(t)
	p, err := layout.FromPath(filepath.Join(dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.ImageIndex
	var referrers []v1.Image
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			if idx, err = top.ImageIndex(d.Digest); err != nil {
				t.Fatal(err)
			}
		case d.ArtifactType != "":
			img, err := top.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			referrers = append(referrers, img)
		}
	}
	if idx == nil {
		t.Fatal("the layout holds no image index")
	}
	digest, _ := idx.Digest()
	if !strings.HasSuffix(m.Image, "@"+digest.String()) {
		t.Errorf("the layout's index is %s; the release pushed %s", digest, m.Image)
	}
	manifests, _ := idx.IndexManifest()
	var got []string
	for _, d := range manifests.Manifests {
		plat := Platform{d.Platform.OS, d.Platform.Architecture}
		got = append(got, plat.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		if cf.OS != plat.OS || cf.Architecture != plat.Arch || cf.Config.User != ImageUser || !slices.Equal(cf.Config.Entrypoint, []string{ImagePath + "sluice"}) {
			t.Errorf("%s: config %s/%s user %q entrypoint %q", plat, cf.OS, cf.Architecture, cf.Config.User, cf.Config.Entrypoint)
		}
		files := imageFiles(t, img)
		bins := untar(t, filepath.Join(dir, ArchiveName(m.Version, plat)))
		for _, b := range Binaries {
			if !bytes.Equal(files["usr/local/bin/"+b], bins[b]) {
				t.Errorf("%s: the image's %s is not the archive's", plat, b)
			}
		}
		for f := range files {
			if strings.HasPrefix(f, "bin/") || strings.Contains(f, "sh") && !strings.HasPrefix(f, "usr/local/bin/sluice") {
				t.Errorf("%s: the image holds %s", plat, f)
			}
		}
	}
	var linux []string
	for _, a := range m.Artifacts {
		if a.Kind == "archive" && strings.HasPrefix(a.Platform, "linux/") {
			linux = append(linux, a.Platform)
		}
	}
	slices.Sort(linux)
	if slices.Sort(got); len(got) == 0 || !slices.Equal(got, linux) {
		t.Errorf("the image's platforms are %q, the release's Linux archives %q", got, linux)
	}

	// The signature, verified by the real cosign against a registry that
	// holds what the release pushed.
	ref := serve(t, idx, referrers, m.Version)
	cosign := testenv.CosignBinary(t)
	verify := func(key string) ([]byte, error) {
		return exec.Command(cosign, "verify", "--key", key, "--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry", ref).CombinedOutput()
	}
	if out, err := verify(filepath.Join(dir, "cosign.pub")); err != nil {
		t.Fatalf("cosign verify with the release's key: %v\n%s", err, out)
	}
	other := t.TempDir()
	gen := exec.Command(cosign, "generate-key-pair")
	gen.Dir, gen.Env = other, append(os.Environ(), "COSIGN_PASSWORD=")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := verify(filepath.Join(other, "cosign.pub")); err == nil {
		t.Errorf("cosign verify accepted another key:\n%s", out)
	}
}

func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(tr)
			out[h.Name] = data
		}
		rc.Close()
	}
	return out
}

// serve puts the image index (tagged) and its referrers in a registry in
// this process and returns the index's repository@digest.
func serve(t *testing.T, idx v1.ImageIndex, referrers []v1.Image, tag string) string {
	t.Helper()
	reg := testenv.NewRegistry(t)
	repo := reg.Host + "/sluice-dev/sluice"
	d := reg.PushIndex(t, "sluice-dev/sluice:"+tag, idx)
	for _, img := range referrers {
		rd, _ := img.Digest()
		ref, _ := name.NewDigest(repo + "@" + rd.String())
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	return repo + "@" + d
}

// The checksums' signature: the real cosign verifies the sums with the
// release's key, and refuses sums that were changed.
func TestTheReleasesChecksumsAreSigned(t *testing.T) {
	dir, _ := snapshot(t)
	cosign := testenv.CosignBinary(t)
	verify := func(sums string) ([]byte, error) {
		return exec.Command(cosign, "verify-blob", "--key", filepath.Join(dir, "cosign.pub"), "--bundle", filepath.Join(dir, ChecksumsBundle), "--insecure-ignore-tlog", sums).CombinedOutput()
	}
	if out, err := verify(filepath.Join(dir, ChecksumsName)); err != nil {
		t.Fatalf("cosign verify-blob: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(filepath.Join(dir, ChecksumsName))
	forged := filepath.Join(t.TempDir(), ChecksumsName)
	os.WriteFile(forged, bytes.Replace(data, []byte("0"), []byte("1"), 1), 0o644)
	if out, err := verify(forged); err == nil {
		t.Errorf("cosign verify-blob accepted changed sums:\n%s", out)
	}
}

// The same commit gives the same bytes: the snapshot built linux/amd64
// again from a second checkout (another path) and found them equal. A
// snapshot of a work tree with changes cannot say; a clean clone (CI)
// must.
func TestTheReleaseIsReproducible(t *testing.T) {
	dir, m := snapshot(t)
	data, err := os.ReadFile(filepath.Join(dir, "reproduced.json"))
	if os.IsNotExist(err) {
		if out, _ := exec.Command("git", "status", "--porcelain").Output(); len(out) > 0 {
			t.Skip("the work tree has changes: the snapshot did not check reproducibility (a clean clone does)")
		}
		t.Fatal("a snapshot of a clean tree without reproduced.json: make release-snapshot checks it")
	}
	var r struct {
		Platform, Commit string
		SHA256           map[string]string
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	bins := untar(t, filepath.Join(dir, ArchiveName(m.Version, Platform{"linux", "amd64"})))
	for _, b := range Binaries {
		h := sha256.Sum256(bins[b])
		if r.Commit != m.Commit || r.SHA256[b] != hex.EncodeToString(h[:]) {
			t.Errorf("%s: built again %s at %s; the release's is %x", b, r.SHA256[b], r.Commit, h)
		}
	}
}

// The chart: packaged as the release's version, its image the release's,
// pushed as an OCI chart beside the image.
func TestTheReleasesChart(t *testing.T) {
	dir, m := snapshot(t)
	if !strings.HasPrefix(m.Chart, "oci://") || !strings.HasSuffix(m.Chart, "/charts/sluice:"+strings.TrimPrefix(m.Version, "v")) {
		t.Errorf("the chart was pushed as %q", m.Chart)
	}
	out, err := exec.Command(testenv.HelmBinary(t), "template", "sluice", filepath.Join(dir, ChartName(m.Version))).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template of the packaged chart: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "image: ghcr.io/sluice-dev/sluice:"+m.Version+"\n") {
		t.Errorf("the packaged chart does not run the release's image %s", m.Version)
	}
}
