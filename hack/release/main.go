// Command release makes a release of Sluice (package release) from the
// commit checked out.
//
//	go run ./hack/release -version v0.1.0 -image ghcr.io/sluice-dev/sluice -out dist
//
// signs keyless (a CI's OIDC identity) and pushes with the default
// keychain: the release workflow's job. With -snapshot it runs here with
// nothing outside: the image goes to a registry in this process, is signed
// with a key made for the run (dist/cosign.key, dist/cosign.pub), and is
// saved with its signatures as an OCI layout (dist/image) that the tests
// of package release check, with the real cosign.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/release"
)

func main() {
	version := flag.String("version", "", "the release's version (v0.1.0); -snapshot: v0.0.0-snapshot")
	image := flag.String("image", "ghcr.io/sluice-dev/sluice", "the repository the controller's image is pushed to (-snapshot: a registry in this process)")
	out := flag.String("out", "dist", "the folder the release is written to")
	platforms := flag.String("platforms", "", "GOOS/GOARCH,... (default: linux and darwin on amd64 and arm64)")
	snapshot := flag.Bool("snapshot", false, "a release of the work tree, pushed and signed here (see above)")
	cosign := flag.String("cosign", "cosign", "the cosign binary")
	sbom := flag.String("sbom", "cyclonedx-gomod", "the cyclonedx-gomod binary")
	helm := flag.String("helm", "helm", "the helm binary (packages and pushes charts/sluice)")
	flag.Parse()
	if err := run(*version, *image, *out, *platforms, *cosign, *sbom, *helm, *snapshot); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(version, image, out, platforms, cosign, sbom, helm string, snapshot bool) error {
	ctx := context.Background()
	git := func(args ...string) (string, error) {
		b, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(b)), err
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return fmt.Errorf("git rev-parse HEAD: %w", err)
	}
	when, err := git("show", "-s", "--format=%cI", "HEAD")
	if err != nil {
		return err
	}
	at, err := time.Parse(time.RFC3339, when)
	if err != nil {
		return err
	}
	// As Go stamps a build modified: untracked files count.
	dirty, _ := git("status", "--porcelain")
	if dirty != "" && !snapshot {
		return fmt.Errorf("the work tree has changes: a release is of a commit")
	}
	dir, _ := os.Getwd()
	o := release.Options{Version: version, Commit: commit, CommitTime: at.UTC(), Dir: dir, Out: out, SBOM: sbom, Image: image, Cosign: cosign, Helm: helm, Chart: "charts/sluice", Log: os.Stderr}
	if platforms != "" {
		o.Platforms = nil
		for _, p := range strings.Split(platforms, ",") {
			os_, arch, ok := strings.Cut(p, "/")
			if !ok {
				return fmt.Errorf("-platforms %q: GOOS/GOARCH expected", p)
			}
			o.Platforms = append(o.Platforms, release.Platform{OS: os_, Arch: arch})
		}
	}
	if !snapshot {
		if version == "" {
			return fmt.Errorf("-version is required")
		}
		_, err := release.Run(ctx, o)
		return err
	}

	if o.Version == "" {
		o.Version = "v0.0.0-snapshot"
	}
	os.RemoveAll(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(l)
	defer srv.Close()
	host := l.Addr().String()
	ref := host + "/" + strings.SplitN(image, "/", 2)[1]
	o.Image = ref
	o.Push = func(ctx context.Context, ref string, idx v1.ImageIndex) error {
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			return err
		}
		return remote.WriteIndex(r, idx, remote.WithContext(ctx))
	}
	// The key is made outside the release's folder, whose contents must
	// be the release's only; the public half is copied in.
	keys, err := os.MkdirTemp("", "sluice-release-key")
	if err != nil {
		return err
	}
	defer os.RemoveAll(keys)
	gen := exec.Command(cosign, "generate-key-pair")
	gen.Dir, gen.Env = keys, append(os.Environ(), "COSIGN_PASSWORD=")
	if b, err := gen.CombinedOutput(); err != nil {
		return fmt.Errorf("cosign generate-key-pair: %w\n%s", err, b)
	}
	o.Key, o.CosignArgs = filepath.Join(keys, "cosign.key"), []string{"--allow-http-registry", "--allow-insecure-registry"}
	o.HelmArgs = []string{"--plain-http"}
	m, err := release.Run(ctx, o)
	if err != nil {
		return err
	}
	pub, err := os.ReadFile(filepath.Join(keys, "cosign.pub"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "cosign.pub"), pub, 0o644); err != nil {
		return err
	}
	// The chart as a team pulls it from the registry.
	pulled := filepath.Join(keys, "pulled")
	os.MkdirAll(pulled, 0o755)
	pull := exec.Command(helm, "pull", m.Chart, "--plain-http", "--destination", pulled)
	if b, err := pull.CombinedOutput(); err != nil {
		return fmt.Errorf("helm pull %s: %w\n%s", m.Chart, err, b)
	}
	// The registry ends with this process: the image and what refers to
	// it (cosign's signature bundle) are kept as an OCI layout.
	if err := save(m.Image, o.Version, filepath.Join(out, "image")); err != nil {
		return fmt.Errorf("saving the image: %w", err)
	}
	// The same commit gives the same bytes: linux/amd64 built again from
	// another checkout of the commit (another path) is compared.
	if dirty == "" {
		if err := reproduce(o, filepath.Join(out, "reproduced.json")); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(os.Stderr, "the work tree has changes: reproducibility not checked (a clean clone checks it)")
	}
	fmt.Fprintf(os.Stderr, "snapshot %s of %s in %s: image %s (%s), signed\n", o.Version, commit[:12], out, m.Image, strings.Join(m.ImagePlatforms, ", "))
	return nil
}

// save writes the image index ref (repository@digest) and its referrers
// to an OCI layout: the index named tag, each referrer by its digest.
func save(ref, tag, dir string) error {
	d, err := name.NewDigest(ref, name.Insecure)
	if err != nil {
		return err
	}
	idx, err := remote.Index(d)
	if err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return err
	}
	refs, err := remote.Referrers(d)
	if err != nil {
		return err
	}
	im, err := refs.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) == 0 {
		return fmt.Errorf("%s has no signature", ref)
	}
	for _, desc := range im.Manifests {
		img, err := remote.Image(d.Context().Digest(desc.Digest.String()))
		if err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": desc.ArtifactType})); err != nil {
			return err
		}
	}
	return nil
}

// reproduce builds linux/amd64 again from a second checkout of the commit
// and writes what it compared to file; a difference is an error.
func reproduce(o release.Options, file string) error {
	p := release.Platform{OS: "linux", Arch: "amd64"}
	tmp, err := os.MkdirTemp("", "sluice-reproduce")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tree := filepath.Join(tmp, "checkout")
	if b, err := exec.Command("git", "worktree", "add", "--detach", tree, o.Commit).CombinedOutput(); err != nil {
		return fmt.Errorf("git worktree add: %w\n%s", err, b)
	}
	defer exec.Command("git", "worktree", "remove", "--force", tree).Run()
	bin := filepath.Join(tmp, "bin") + string(filepath.Separator)
	args := append(release.BuildFlags(o.Version, o.Commit), "-o", bin)
	for _, b := range release.Binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building again in %s: %w\n%s", tree, err, b)
	}
	sums := map[string]string{}
	for _, b := range release.Binaries {
		first, err := os.ReadFile(filepath.Join(o.Out, release.BinaryDir(p), b))
		if err != nil {
			return err
		}
		again, err := os.ReadFile(filepath.Join(bin, b))
		if err != nil {
			return err
		}
		h1, h2 := sha256.Sum256(first), sha256.Sum256(again)
		if h1 != h2 {
			return fmt.Errorf("%s for %s is not reproducible: %x here, %x from another checkout", b, p, h1, h2)
		}
		sums[b] = hex.EncodeToString(h1[:])
	}
	data, _ := json.MarshalIndent(map[string]any{"platform": p.String(), "commit": o.Commit, "sha256": sums}, "", "  ")
	fmt.Fprintf(os.Stderr, "%s: the same bytes from another checkout\n", p)
	return os.WriteFile(file, append(data, '\n'), 0o644)
}
