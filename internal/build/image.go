package build

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
)

// Labels Sluice sets on the images it builds.
const (
	LabelInputs   = "dev.sluice.image.inputs"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
)

// base is a resolved base image: one image, or an index of per-platform
// images.
type base struct {
	digest string
	image  v1.Image
	index  v1.ImageIndex
	// mediaType is the base's manifest (or index) media type.
	mediaType types.MediaType
}

// Scratch is the base that is no image.
const Scratch = "scratch"

func resolveBase(ctx context.Context, reg *registry.Client, ref string) (*base, error) {
	if ref == Scratch {
		img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}})
		if err != nil {
			return nil, err
		}
		return &base{digest: Scratch, image: img, mediaType: types.OCIManifestSchema1}, nil
	}
	r, err := reg.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", ref, err)
	}
	desc, err := remote.Get(r, reg.Options(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", ref, err)
	}
	b := &base{digest: desc.Digest.String(), mediaType: desc.MediaType}
	if desc.MediaType.IsIndex() {
		b.index, err = desc.ImageIndex()
	} else {
		b.image, err = desc.Image()
	}
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", ref, err)
	}
	return b, nil
}

// layered is the built result: an image, or an index.
type layered struct {
	image v1.Image
	index v1.ImageIndex
}

func (l layered) digest() (v1.Hash, error) {
	if l.index != nil {
		return l.index.Digest()
	}
	return l.image.Digest()
}

// layers makes the files' layer once per media type, for all platforms.
type layers struct {
	files []file
	made  map[types.MediaType]v1.Layer
}

func (l *layers) of(mt types.MediaType) (v1.Layer, error) {
	if ly, ok := l.made[mt]; ok {
		return ly, nil
	}
	ly, err := layer(l.files, mt)
	if err != nil {
		return nil, err
	}
	if l.made == nil {
		l.made = map[types.MediaType]v1.Layer{}
	}
	l.made[mt] = ly
	return ly, nil
}

// lay puts the files onto every platform of the base, with the config.
func (b *base) lay(files []file, cfg v1alpha1.ImageConfig, labels map[string]string) (layered, error) {
	ls := &layers{files: files}
	if b.image != nil {
		img, err := layOne(b.image, ls, cfg, labels)
		return layered{image: img}, err
	}
	im, err := b.index.IndexManifest()
	if err != nil {
		return layered{}, err
	}
	idx := mutate.IndexMediaType(empty.Index, b.mediaType)
	var adds []mutate.IndexAddendum
	for _, m := range im.Manifests {
		// Attestations and the like describe the base, not this image.
		if !m.MediaType.IsImage() || m.Platform == nil || m.Platform.OS == "unknown" {
			continue
		}
		img, err := b.index.Image(m.Digest)
		if err != nil {
			return layered{}, err
		}
		out, err := layOne(img, ls, cfg, labels)
		if err != nil {
			return layered{}, fmt.Errorf("platform %s: %w", m.Platform, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: out, Descriptor: v1.Descriptor{Platform: m.Platform}})
	}
	if len(adds) == 0 {
		return layered{}, fmt.Errorf("the base index has no platform images")
	}
	return layered{index: mutate.AppendManifests(idx, adds...)}, nil
}

func layOne(img v1.Image, ls *layers, cfg v1alpha1.ImageConfig, labels map[string]string) (v1.Image, error) {
	mt, err := img.MediaType()
	if err != nil {
		return nil, err
	}
	layerType := types.OCILayer
	if mt == types.DockerManifestSchema2 {
		layerType = types.DockerLayer
	}
	l, err := ls.of(layerType)
	if err != nil {
		return nil, err
	}
	out, err := mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "sluice build", Created: v1.Time{Time: epoch}}})
	if err != nil {
		return nil, err
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	c := &cf.Config
	if len(cfg.Entrypoint) > 0 {
		c.Entrypoint, c.Cmd = cfg.Entrypoint, nil
	}
	if len(cfg.Cmd) > 0 {
		c.Cmd = cfg.Cmd
	}
	c.Env = mergeEnv(c.Env, cfg.Env)
	if cfg.WorkingDir != "" {
		c.WorkingDir = cfg.WorkingDir
	}
	if cfg.User != "" {
		c.User = cfg.User
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range cfg.Labels {
		c.Labels[k] = v
	}
	for k, v := range labels {
		c.Labels[k] = v
	}
	cf.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(out, cf)
}

// mergeEnv sets env over a base's KEY=VALUE list: existing keys replaced
// in place, new ones appended sorted.
func mergeEnv(base []string, env map[string]string) []string {
	out := append([]string(nil), base...)
	done := map[string]bool{}
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := env[k]; ok {
			out[i] = k + "=" + v
			done[k] = true
		}
	}
	var keys []string
	for k := range env {
		if !done[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}
