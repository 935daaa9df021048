package build

import (
	"context"
	"errors"
	"fmt"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/registry"
)

// Retag gives each Image the tag without building it: where the tag
// exists it is kept (a build under it earlier); otherwise it is pointed at
// the digest the Image's own first existing tag resolves to (sourceCommit
// being its first source's commit). An Image none of whose tags exists is
// an error: it has to be built.
func (b *Builder) Retag(ctx context.Context, images []config.Image, tag string) []Result {
	return b.each(ctx, images, func(ctx context.Context, img config.Image) Result { return b.forImage(img).retagOne(ctx, img, tag) })
}

func (b *Builder) retagOne(ctx context.Context, img config.Image, tag string) Result {
	res := Result{Name: img.Name, Image: img.Spec.Image, Tags: []string{tag}}
	fail := func(err error) Result {
		res.Err = fmt.Errorf("Image %s%s: %w", img.Name, origin(img), err)
		return res
	}
	repo, err := b.Registry.ParseRepository(img.Spec.Image)
	if err != nil {
		return fail(fmt.Errorf("spec.image: %w", err))
	}
	if d, err := b.Registry.Digest(ctx, repo.Tag(tag).String()); err == nil {
		res.Digest, res.Source = d, tag+" (kept)"
		return res
	} else if !errors.Is(err, registry.ErrNotFound) {
		return fail(err)
	}
	var tried []string
	for _, t := range img.Spec.Tags {
		if t == v1alpha1.TagSourceCommit {
			opened, err := b.openSource(ctx, img, 0)
			if err != nil {
				return fail(fmt.Errorf("spec.source[0]: %w", err))
			}
			if opened.Commit == "" {
				continue
			}
			t = opened.Commit
		}
		tried = append(tried, t)
		d, err := b.Registry.Digest(ctx, repo.Tag(t).String())
		if errors.Is(err, registry.ErrNotFound) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		if err := b.tag(ctx, repo, d, []string{tag}); err != nil {
			return fail(err)
		}
		res.Digest, res.Source = d, t
		return res
	}
	return fail(fmt.Errorf("none of its tags exists (%v): build it", tried))
}
