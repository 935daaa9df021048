package release

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Pusher writes an image index to a reference ("repo:tag").
type Pusher func(ctx context.Context, ref string, idx v1.ImageIndex) error

// ImagePath is where the binaries are in the image.
const ImagePath = "/usr/local/bin/"

// ImageUser is the user the image runs as (no name: the image has no
// /etc/passwd).
const ImageUser = "65532:65532"

// Image is the controller's image index for platforms: on nothing (no
// shell, no package manager, no CA files: sluice carries Mozilla's roots
// for when the system has none), the two binaries of each platform's
// build and an empty /tmp (HOME), dated the commit. The same binaries
// give the same digest.
func Image(o Options, platforms []Platform) (v1.ImageIndex, error) {
	labels := map[string]string{
		"org.opencontainers.image.title":       "sluice",
		"org.opencontainers.image.description": "GitOps hydration: sluice serve, the controller",
		"org.opencontainers.image.source":      "https://github.com/sluice-dev/sluice",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Commit,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range platforms {
		files := []tarFile{{name: "tmp/", mode: 0o1777}, {name: "usr/", mode: 0o755}, {name: "usr/local/", mode: 0o755}, {name: "usr/local/bin/", mode: 0o755}}
		for _, b := range Binaries {
			files = append(files, tarFile{name: "usr/local/bin/" + b, src: filepath.Join(o.Out, BinaryDir(p), b), mode: 0o755})
		}
		var layer bytes.Buffer
		if err := writeTar(&layer, files, o.CommitTime); err != nil {
			return nil, err
		}
		// Uncompressed: the layer's digest is the tar's, whatever gzip
		// a registry or client would use.
		img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
			Layer: static.NewLayer(layer.Bytes(), types.OCIUncompressedLayer), History: v1.History{CreatedBy: "sluice release", Created: v1.Time{Time: o.CommitTime}},
		})
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Created = p.OS, p.Arch, v1.Time{Time: o.CommitTime}
		cf.Config.Entrypoint = []string{ImagePath + "sluice"}
		cf.Config.User = ImageUser
		cf.Config.Env = []string{"PATH=" + ImagePath[:len(ImagePath)-1], "HOME=/tmp"}
		cf.Config.Labels = labels
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	return mutate.Annotations(idx, map[string]string{
		"org.opencontainers.image.source":   labels["org.opencontainers.image.source"],
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Commit,
	}).(v1.ImageIndex), nil
}

// pushImage pushes the image index as o.Image:o.Version and returns it as
// repository@digest.
func pushImage(ctx context.Context, o Options, platforms []Platform) (string, error) {
	idx, err := Image(o, platforms)
	if err != nil {
		return "", fmt.Errorf("the image: %w", err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	push := o.Push
	if push == nil {
		push = func(ctx context.Context, ref string, idx v1.ImageIndex) error {
			r, err := name.ParseReference(ref)
			if err != nil {
				return err
			}
			return remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		}
	}
	ref := o.Image + ":" + o.Version
	fmt.Fprintf(o.Log, "pushing %s (%s)\n", ref, d)
	if err := push(ctx, ref, idx); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return o.Image + "@" + d.String(), nil
}
