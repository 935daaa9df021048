package ociartifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// PushOptions say how an artifact is pushed.
type PushOptions struct {
	// Remote are the registry options: transport, credentials.
	Remote []remote.Option
	// Overwrite moves a tag that points at an artifact Sluice did not
	// push; without it such a tag is refused, naming the digest found.
	Overwrite bool
	// BeforeTag runs once the artifact is whole in the registry (by
	// digest, untagged), before any tag moves to it: where it is signed.
	// An error leaves every tag where it was.
	BeforeTag func(ctx context.Context, ref name.Digest) error
	// Tags are further tags the artifact is given (an immutable tag per
	// hydration, say): each before the tag that moves, so that a push
	// cut short leaves the moving tag where it was.
	Tags []string
	// Guard, if set, is asked before a tag is written to complete what
	// an earlier push left out (see Complete): does this writer still
	// lead? An error writes nothing.
	Guard func(ctx context.Context) error
}

// PushResult is what a push did.
type PushResult struct {
	// Digest is the artifact's digest.
	Digest v1.Hash
	// Pushed is false when the tag already pointed at the artifact:
	// nothing was written.
	Pushed bool
	// Previous is what the tag pointed at before (zero when it did not
	// exist).
	Previous v1.Hash
	// Completed are the tags of Tags written to an artifact the tag
	// already named (an earlier push cut short before them).
	Completed []string
}

// Push writes img to the tag's repository and moves the tag to it, unless
// the tag already points at it. The artifact is written whole by digest
// first, then BeforeTag runs, then the tags move: a push cut short, or
// refused by BeforeTag, moves no tag (its blobs may stay in the registry,
// untagged, for its garbage collection). A tag that points at an
// artifact Sluice did not push is not moved unless o.Overwrite.
//
// The registry API has no compare-and-swap of a tag: two writers of one
// tag must be kept apart by the caller (the controller's leader election).
func Push(ctx context.Context, tag name.Tag, img v1.Image, o PushOptions) (PushResult, error) {
	opts := append(append([]remote.Option{}, o.Remote...), remote.WithContext(ctx))
	digest, err := img.Digest()
	if err != nil {
		return PushResult{}, err
	}
	res := PushResult{Digest: digest}
	prev, found, err := head(tag, opts)
	if err != nil {
		return res, fmt.Errorf("looking up %s: %w", tag, err)
	}
	if found {
		res.Previous = prev.Digest
		if prev.Digest == digest {
			res.Completed, err = Complete(ctx, tag.Context().Digest(digest.String()), o.Tags, o.Guard, o.Remote...)
			return res, err
		}
		if !o.Overwrite {
			m, err := manifestOf(tag.Context().Digest(prev.Digest.String()), opts)
			if err != nil {
				return res, fmt.Errorf("reading what %s points at: %w", tag, err)
			}
			if !Ours(m) {
				return res, fmt.Errorf("%s points at %s, which Sluice did not push: refusing to move it (let the destination overwrite it, or choose another tag)", tag, prev.Digest)
			}
		}
	}
	byDigest := tag.Context().Digest(digest.String())
	if err := remote.Write(byDigest, img, opts...); err != nil {
		return res, fmt.Errorf("pushing %s: %w", byDigest, err)
	}
	if o.BeforeTag != nil {
		if err := o.BeforeTag(ctx, byDigest); err != nil {
			return res, fmt.Errorf("%s, before tagging it %s: %w", byDigest, tag.TagStr(), err)
		}
	}
	// The moving tag last: until it moves, whoever reads it reads the
	// artifact before, whatever else failed.
	for _, t := range append(slices.DeleteFunc(slices.Clone(o.Tags), func(t string) bool { return t == tag.TagStr() }), tag.TagStr()) {
		ref := tag.Context().Tag(t)
		if err := remote.Tag(ref, img, opts...); err != nil {
			return res, fmt.Errorf("tagging %s as %s: %w", byDigest, t, err)
		}
	}
	res.Pushed = true
	return res, nil
}

// Complete gives the artifact ref each of tags that does not name it
// yet, after asking guard: what a push cut short between its tags left
// out (an immutable tag is named after its content, so it names nothing
// else). It returns the tags written.
func Complete(ctx context.Context, ref name.Digest, tags []string, guard func(context.Context) error, opts ...remote.Option) ([]string, error) {
	opts = append(append([]remote.Option{}, opts...), remote.WithContext(ctx))
	var missing []string
	for _, t := range tags {
		d, found, err := head(ref.Context().Tag(t), opts)
		if err != nil {
			return nil, fmt.Errorf("looking up %s: %w", ref.Context().Tag(t), err)
		}
		if !found || d.Digest.String() != ref.DigestStr() {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if guard != nil {
		if err := guard(ctx); err != nil {
			return nil, err
		}
	}
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	}
	for i, t := range missing {
		if err := remote.Tag(ref.Context().Tag(t), desc, opts...); err != nil {
			return missing[:i], fmt.Errorf("tagging %s as %s: %w", ref, t, err)
		}
	}
	return missing, nil
}

// Read reads what a tag points at: its files (within l), its manifest and
// digest. found is false when the tag does not exist.
func Read(ctx context.Context, tag name.Tag, l Limits, opts ...remote.Option) (files map[string][]byte, m *v1.Manifest, digest v1.Hash, found bool, err error) {
	opts = append(append([]remote.Option{}, opts...), remote.WithContext(ctx))
	desc, found, err := head(tag, opts)
	if err != nil || !found {
		return nil, nil, v1.Hash{}, found, err
	}
	img, err := remote.Image(tag.Context().Digest(desc.Digest.String()), opts...)
	if err != nil {
		return nil, nil, desc.Digest, true, fmt.Errorf("pulling %s: %w", tag, err)
	}
	if m, err = img.Manifest(); err != nil {
		return nil, nil, desc.Digest, true, err
	}
	if files, err = Files(img, l); err != nil {
		return nil, m, desc.Digest, true, fmt.Errorf("%s@%s: %w", tag, desc.Digest, err)
	}
	return files, m, desc.Digest, true, nil
}

// head looks a tag up; found is false when the registry says it does not
// exist.
func head(tag name.Tag, opts []remote.Option) (*v1.Descriptor, bool, error) {
	desc, err := remote.Head(tag, opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return desc, true, nil
}

// manifestOf reads a manifest.
func manifestOf(ref name.Reference, opts []remote.Option) (*v1.Manifest, error) {
	d, err := remote.Get(ref, opts...)
	if err != nil {
		return nil, err
	}
	return v1.ParseManifest(bytes.NewReader(d.Manifest))
}
