// Package release makes a release of Sluice: sluice and its render worker
// for every platform, built together and reproducibly (the same commit
// gives the same bytes), archived, summed, an SBOM per binary; the
// controller's image for the Linux platforms, from nothing but the two
// binaries; and signatures of the image and of the checksums, by cosign.
// It runs the Go toolchain, cyclonedx-gomod and cosign as a release
// engineer would, and knows nothing of where it runs (a CI job, or
// `make release-snapshot` here).
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Platform is a GOOS/GOARCH pair.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are those a release builds; the image is made for the Linux
// ones.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// Binaries are the programs of a release, built together: the render
// worker is used only beside a sluice of the same build.
var Binaries = []string{"sluice", "sluice-render"}

// Options say what to release and with which tools.
type Options struct {
	// Version is the release's ("v0.1.0"); Commit the full SHA it is
	// built from, and CommitTime that commit's time (what every archive
	// entry and the image are dated).
	Version, Commit string
	CommitTime      time.Time
	// Dir is the module's root; Out the folder the release is written to
	// (made; it must not hold another release).
	Dir, Out string
	// Platforms default to Platforms.
	Platforms []Platform
	// Go is the go command (default "go"); SBOM the cyclonedx-gomod
	// binary (required).
	Go, SBOM string
	// Image, if set, is the repository the controller's image is pushed
	// to ("ghcr.io/sluice-dev/sluice"), tagged Version.
	Image string
	// Push writes the image index to Image (see image.go); nil pushes
	// with the default keychain.
	Push Pusher
	// Cosign, if set, is the cosign binary that signs the image and the
	// checksums: with Key (a cosign key file, its password in
	// COSIGN_PASSWORD) or, Key empty, keyless through the CI's OIDC
	// identity. CosignArgs are added to every call that reaches the
	// registry (--allow-http-registry for one on loopback).
	Cosign, Key string
	CosignArgs  []string
	// Helm, if set, is the helm binary that packages the chart (Chart,
	// under Dir) as the release's version and, with Image set, pushes it
	// as an OCI chart beside the image (HelmArgs added: --plain-http for
	// a registry on loopback).
	Helm, Chart string
	HelmArgs    []string
	// Log receives what each step does; nil discards it.
	Log io.Writer
}

// Artifact is one file of a release.
type Artifact struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // archive, binary, sbom, checksums, signature
	Platform string `json:"platform,omitempty"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
}

// Manifest is what a release made, written as manifest.json beside it.
type Manifest struct {
	Version   string     `json:"version"`
	Commit    string     `json:"commit"`
	BuildID   string     `json:"buildID"`
	Artifacts []Artifact `json:"artifacts"`
	// Image is the image index pushed, "repository@digest"; Platforms its
	// platforms.
	Image          string   `json:"image,omitempty"`
	ImagePlatforms []string `json:"imagePlatforms,omitempty"`
	// Chart is the Helm chart pushed, "oci://repository/sluice:version".
	Chart  string `json:"chart,omitempty"`
	Signed bool   `json:"signed"`
}

// BuildID is the identity both binaries of a release are linked with
// (package sandbox): the version and the commit.
func BuildID(version, commit string) string {
	return version + "+" + commit
}

// LDFlags are the linker flags of a release build: stripped, no Go build
// ID (it hashes the build's inputs, paths included), the version and the
// shared identity linked in.
func LDFlags(version, commit string) string {
	return strings.Join([]string{"-s", "-w", "-buildid=",
		"-X", "main.version=" + version,
		"-X", "sluice.dev/sluice/internal/sandbox.build=" + BuildID(version, commit)}, " ")
}

// BuildFlags are a release build's flags: no paths (-trimpath), no VCS
// stamp (a build from a tarball, a clone or a worktree of the tag gives
// the same bytes; the version and commit are linked in), LDFlags.
func BuildFlags(version, commit string) []string {
	return []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", LDFlags(version, commit)}
}

// Run makes the release into o.Out.
func Run(ctx context.Context, o Options) (*Manifest, error) {
	if o.Version == "" || len(o.Commit) != 40 || o.Dir == "" || o.Out == "" || o.SBOM == "" {
		return nil, errors.New("release: version, a full commit SHA, the module's folder, an output folder and cyclonedx-gomod are required")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if entries, err := os.ReadDir(o.Out); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("release: %s is not empty: remove the previous release first", o.Out)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	m := &Manifest{Version: o.Version, Commit: o.Commit, BuildID: BuildID(o.Version, o.Commit)}
	for _, p := range o.Platforms {
		if err := build(ctx, o, p); err != nil {
			return nil, err
		}
		archive, err := pack(o, p)
		if err != nil {
			return nil, err
		}
		m.Artifacts = append(m.Artifacts, archive)
		for _, b := range Binaries {
			a, err := sbom(ctx, o, p, b)
			if err != nil {
				return nil, err
			}
			m.Artifacts = append(m.Artifacts, a)
		}
	}
	if o.Helm != "" {
		a, err := packageChart(ctx, o)
		if err != nil {
			return nil, err
		}
		m.Artifacts = append(m.Artifacts, a)
	}
	sums, err := checksums(o.Out, m.Artifacts)
	if err != nil {
		return nil, err
	}
	m.Artifacts = append(m.Artifacts, sums)
	if o.Image != "" {
		var linux []Platform
		for _, p := range o.Platforms {
			if p.OS == "linux" {
				linux = append(linux, p)
			}
		}
		ref, err := pushImage(ctx, o, linux)
		if err != nil {
			return nil, err
		}
		m.Image = ref
		for _, p := range linux {
			m.ImagePlatforms = append(m.ImagePlatforms, p.String())
		}
		if o.Helm != "" {
			if m.Chart, err = pushChart(ctx, o); err != nil {
				return nil, err
			}
		}
	}
	if o.Cosign != "" {
		sig, err := sign(ctx, o, m.Image)
		if err != nil {
			return nil, err
		}
		m.Artifacts, m.Signed = append(m.Artifacts, sig), true
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	return m, os.WriteFile(filepath.Join(o.Out, "manifest.json"), append(data, '\n'), 0o644)
}

// BinaryDir is where a platform's binaries are written, under Out.
func BinaryDir(p Platform) string { return "sluice_" + p.OS + "_" + p.Arch }

// build builds both binaries of a platform, together.
func build(ctx context.Context, o Options, p Platform) error {
	out := filepath.Join(o.Out, BinaryDir(p))
	fmt.Fprintf(o.Log, "building %s for %s\n", strings.Join(Binaries, " and "), p)
	args := append(BuildFlags(o.Version, o.Commit), "-o", out+string(filepath.Separator))
	for _, b := range Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.CommandContext(ctx, o.Go, args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building for %s: %w\n%s", p, err, out)
	}
	return nil
}

// ArchiveName is a platform's archive: its two binaries, the licence and
// the README.
func ArchiveName(version string, p Platform) string {
	return fmt.Sprintf("sluice_%s_%s_%s.tar.gz", strings.TrimPrefix(version, "v"), p.OS, p.Arch)
}

// pack writes a platform's archive, reproducibly: entries in order, owned
// by root, dated the commit, gzip without a name or time.
func pack(o Options, p Platform) (Artifact, error) {
	var files []tarFile
	for _, b := range Binaries {
		files = append(files, tarFile{name: b, src: filepath.Join(o.Out, BinaryDir(p), b), mode: 0o755})
	}
	for _, f := range []string{"LICENSE", "README.md"} {
		if _, err := os.Stat(filepath.Join(o.Dir, f)); err == nil {
			files = append(files, tarFile{name: f, src: filepath.Join(o.Dir, f), mode: 0o644})
		}
	}
	var tb bytes.Buffer
	if err := writeTar(&tb, files, o.CommitTime); err != nil {
		return Artifact{}, err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(tb.Bytes())
	zw.Close()
	name := ArchiveName(o.Version, p)
	if err := os.WriteFile(filepath.Join(o.Out, name), gz.Bytes(), 0o644); err != nil {
		return Artifact{}, err
	}
	return artifact(o.Out, name, "archive", p.String())
}

type tarFile struct {
	name, src string
	mode      int64
}

// writeTar writes files as a tar stream in name order, each entry owned
// by root and dated at.
func writeTar(w io.Writer, files []tarFile, at time.Time) error {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	tw := tar.NewWriter(w)
	for _, f := range files {
		if f.src == "" { // a directory
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: f.name, Mode: f.mode, ModTime: at, Format: tar.FormatPAX}); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(f.src)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(data)), ModTime: at, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// SBOMName is the SBOM of a platform's binary.
func SBOMName(version string, p Platform, binary string) string {
	return fmt.Sprintf("%s_%s_%s_%s.cdx.json", binary, strings.TrimPrefix(version, "v"), p.OS, p.Arch)
}

// sbom writes a binary's SBOM (CycloneDX, by cyclonedx-gomod from the
// module information Go links into the binary).
func sbom(ctx context.Context, o Options, p Platform, binary string) (Artifact, error) {
	name := SBOMName(o.Version, p, binary)
	cmd := exec.CommandContext(ctx, o.SBOM, "bin", "-json", "-licenses=false", "-version", o.Version, "-output", filepath.Join(o.Out, name), filepath.Join(o.Out, BinaryDir(p), binary))
	if out, err := cmd.CombinedOutput(); err != nil {
		return Artifact{}, fmt.Errorf("the SBOM of %s for %s: %w\n%s", binary, p, err, out)
	}
	return artifact(o.Out, name, "sbom", p.String())
}

// ChecksumsName is the file of the release's SHA-256 sums, in the format
// sha256sum -c reads.
const ChecksumsName = "SHA256SUMS"

func checksums(out string, as []Artifact) (Artifact, error) {
	var b strings.Builder
	sorted := append([]Artifact(nil), as...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, a := range sorted {
		fmt.Fprintf(&b, "%s  %s\n", a.SHA256, a.Name)
	}
	if err := os.WriteFile(filepath.Join(out, ChecksumsName), []byte(b.String()), 0o644); err != nil {
		return Artifact{}, err
	}
	return artifact(out, ChecksumsName, "checksums", "")
}

func artifact(dir, name, kind, platform string) (Artifact, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return Artifact{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Artifact{}, err
	}
	return Artifact{Name: name, Kind: kind, Platform: platform, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// ChartName is the packaged chart: its version is the release's.
func ChartName(version string) string {
	return "sluice-" + strings.TrimPrefix(version, "v") + ".tgz"
}

// packageChart packages the chart as the release's version, its image
// the release's (appVersion).
func packageChart(ctx context.Context, o Options) (Artifact, error) {
	v := strings.TrimPrefix(o.Version, "v")
	cmd := exec.CommandContext(ctx, o.Helm, "package", filepath.Join(o.Dir, o.Chart), "--version", v, "--app-version", o.Version, "--destination", o.Out)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Artifact{}, fmt.Errorf("helm package: %w\n%s", err, out)
	}
	return artifact(o.Out, ChartName(o.Version), "chart", "")
}

// pushChart pushes the packaged chart beside the image: Image's parent
// repository + "/charts/sluice".
func pushChart(ctx context.Context, o Options) (string, error) {
	parent := o.Image[:strings.LastIndex(o.Image, "/")]
	args := append([]string{"push", filepath.Join(o.Out, ChartName(o.Version)), "oci://" + parent + "/charts"}, o.HelmArgs...)
	cmd := exec.CommandContext(ctx, o.Helm, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("helm push: %w\n%s", err, out)
	}
	return "oci://" + parent + "/charts/sluice:" + strings.TrimPrefix(o.Version, "v"), nil
}
