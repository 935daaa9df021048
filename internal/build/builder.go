package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
)

// Builder builds Images.
type Builder struct {
	// Cache opens sources. Required.
	Cache *source.Cache
	// Registry reaches the base images' and the pushed images' registries.
	// Required.
	Registry *registry.Client
	// Jobs bounds the images built at once; the default is 4.
	Jobs int
	// Env is the environment of external builders; the default is this
	// process's.
	Env []string
	// Log receives an external builder's output; the default discards it.
	Log io.Writer
	// AllowBuilders runs the external builders of Images a RepoConfig
	// found in a repository even when the RepoConfig does not allow them
	// (spec.allowBuilders). The builders of the person's own files always
	// run.
	AllowBuilders bool
	// Credentials, if set, gives an Image's own credentials for its i-th
	// source (a controller's Secrets); nil uses the Cache's.
	Credentials func(img config.Image, i int) *source.Credentials
	// RegistryFor, if set, gives the client an Image is pushed (and its
	// base pulled) through; nil is Registry.
	RegistryFor func(img config.Image) *Builder
}

// forImage is the Builder an Image is built with: its own registry client
// where RegistryFor gives one.
func (b *Builder) forImage(img config.Image) *Builder {
	if b.RegistryFor != nil {
		if ib := b.RegistryFor(img); ib != nil {
			return ib
		}
	}
	return b
}

// openSource opens an Image's i-th source with its own credentials.
func (b *Builder) openSource(ctx context.Context, img config.Image, i int) (*source.Opened, error) {
	s := img.Spec.Source[i]
	var creds *source.Credentials
	if b.Credentials != nil {
		creds = b.Credentials(img, i)
	}
	return b.Cache.OpenSourceWith(ctx, s.Repo, s.Ref, img.Origin.Dir, creds)
}

// Options say what one Build does beyond the Images' own settings.
type Options struct {
	// Tags are pushed for every image built, besides the Image's own: a
	// takeover's deployment tag.
	Tags []string
}

// Result is what became of one Image.
type Result struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Digest is the pushed manifest's (or index's).
	Digest string   `json:"digest,omitempty"`
	Tags   []string `json:"tags,omitempty"`
	// Inputs is the hash of the image's inputs.
	Inputs string `json:"inputs,omitempty"`
	// Built is false when an image with the same inputs existed and was
	// only tagged (or, for Retag, when it was only tagged).
	Built bool `json:"built"`
	// Source is the first source's repository and commit ("+dirty" for a
	// working tree with uncommitted changes to the mapped files).
	Source string `json:"source,omitempty"`
	Error  string `json:"error,omitempty"`
	Err    error  `json:"-"`
}

// Ref is the pushed image by digest.
func (r Result) Ref() string { return r.Image + "@" + r.Digest }

// InputsTag is the tag an image's inputs hash is pushed under, so the next
// build with the same inputs finds it with one request.
func InputsTag(hash string) string { return "inputs-" + hash[:32] }

// Build builds the Images in parallel; each one's failure is in its
// Result.
func (b *Builder) Build(ctx context.Context, images []config.Image, o Options) []Result {
	return b.each(ctx, images, func(ctx context.Context, img config.Image) Result { return b.forImage(img).buildOne(ctx, img, o) })
}

// each runs f for every image, Jobs at a time.
func (b *Builder) each(ctx context.Context, images []config.Image, f func(context.Context, config.Image) Result) []Result {
	jobs := b.Jobs
	if jobs <= 0 {
		jobs = 4
	}
	out := make([]Result, len(images))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	for i, img := range images {
		g.Go(func() error {
			r := f(gctx, img)
			if r.Err != nil {
				r.Error = r.Err.Error()
			}
			out[i] = r
			return nil
		})
	}
	g.Wait()
	return out
}

// source is one opened source with its files.
type openedSource struct {
	*source.Opened
	files []file
	dirty bool
}

func (b *Builder) buildOne(ctx context.Context, img config.Image, o Options) Result {
	spec := img.Spec
	res := Result{Name: img.Name, Image: spec.Image}
	fail := func(err error) Result {
		res.Err = fmt.Errorf("Image %s%s: %w", img.Name, origin(img), err)
		return res
	}
	if spec.Builder != nil && img.Origin.Repo != "" && !img.Origin.AllowBuilders && !b.AllowBuilders {
		return fail(fmt.Errorf("spec.builder would run %q on this machine, and this Image comes from %s: run builders of a repository only where you trust it, with spec.allowBuilders: true on its RepoConfig or --allow-builders", spec.Builder.Command, img.Origin.Repo))
	}
	var srcs []*openedSource
	var all []file
	for i, s := range spec.Source {
		opened, err := b.openSource(ctx, img, i)
		if err != nil {
			return fail(fmt.Errorf("spec.source[%d]: %w", i, err))
		}
		src := &openedSource{Opened: opened}
		field := fmt.Sprintf("spec.source[%d].mappings", i)
		var ignore *source.Ignore
		if opened.Working() {
			ignore = source.NewIgnore(opened.FS)
		}
		if src.files, err = collect(ctx, opened.FS, s.Mappings, field, ignore); err != nil {
			return fail(err)
		}
		if opened.Working() && opened.Head != nil {
			head, err := collect(ctx, opened.Head, s.Mappings, field, ignore)
			src.dirty = err != nil || !sameFiles(head, src.files)
		}
		srcs = append(srcs, src)
		all = append(all, src.files...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].dest < all[j].dest })
	first := srcs[0]
	res.Source = source.Redact(first.Location.String())
	if first.Commit != "" {
		res.Source += "@" + first.Commit[:min(12, len(first.Commit))]
	}
	if first.dirty {
		res.Source += "+dirty"
	}
	// An external builder reads the base itself.
	bs := &base{digest: "builder:" + spec.Base}
	if spec.Builder == nil {
		var err error
		if bs, err = resolveBase(ctx, b.Registry, spec.Base); err != nil {
			return fail(fmt.Errorf("spec.base: %w", err))
		}
	}
	res.Inputs = inputsHash(bs.digest, all, spec)
	res.Tags = tagsFor(spec.Tags, o.Tags, first)
	repo, err := b.Registry.ParseRepository(spec.Image)
	if err != nil {
		return fail(fmt.Errorf("spec.image: %w", err))
	}
	inputsRef := repo.Tag(InputsTag(res.Inputs))

	// Built before: only tag.
	if d, err := b.Registry.Digest(ctx, inputsRef.String()); err == nil {
		res.Digest = d
		if err := b.tag(ctx, repo, d, res.Tags); err != nil {
			return fail(err)
		}
		return res
	} else if !errors.Is(err, registry.ErrNotFound) {
		return fail(fmt.Errorf("looking up %s: %w", inputsRef, err))
	}

	res.Built = true
	if spec.Builder != nil {
		d, err := b.external(ctx, img, first, inputsRef)
		if err != nil {
			return fail(err)
		}
		res.Digest = d
	} else {
		labels := map[string]string{LabelInputs: res.Inputs, labelSource: source.Redact(first.Location.Raw)}
		if first.Commit != "" && !first.dirty {
			labels[labelRevision] = first.Commit
		}
		out, err := bs.lay(all, spec.Config, labels)
		if err != nil {
			return fail(err)
		}
		if err := b.push(ctx, inputsRef, out); err != nil {
			return fail(fmt.Errorf("pushing %s: %w", inputsRef, err))
		}
		h, err := out.digest()
		if err != nil {
			return fail(err)
		}
		res.Digest = h.String()
	}
	if err := b.tag(ctx, repo, res.Digest, res.Tags); err != nil {
		return fail(err)
	}
	return res
}

// tagsFor resolves an Image's tags: sourceCommit is the first source's
// commit, left out for a working tree with uncommitted changes (the image
// is not what that commit holds).
func tagsFor(own, extra []string, first *openedSource) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range append(append([]string(nil), own...), extra...) {
		if t == v1alpha1.TagSourceCommit {
			if first.Commit == "" || first.dirty {
				continue
			}
			t = first.Commit
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// inputsHash digests everything an image is made of.
func inputsHash(baseDigest string, files []file, spec v1alpha1.ImageSpec) string {
	h := sha256.New()
	fmt.Fprintf(h, "sluice-image/v1\nbase %s\n", baseDigest)
	for _, f := range files {
		fmt.Fprintf(h, "file %s %v %s\n", f.dest, f.exec, f.hash)
	}
	cfg, _ := json.Marshal(spec.Config) // maps marshal sorted
	fmt.Fprintf(h, "config %s\n", cfg)
	if spec.Builder != nil {
		fmt.Fprintf(h, "builder %q\n", spec.Builder.Command)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// push writes the image (or index) under ref; blobs the registry has are
// not uploaded again.
func (b *Builder) push(ctx context.Context, ref name.Tag, out layered) error {
	opts := b.Registry.PushOptions(ctx)
	var err error
	if out.index != nil {
		err = remote.WriteIndex(ref, out.index, opts...)
	} else {
		err = remote.Write(ref, out.image, opts...)
	}
	b.Registry.Forget(ref.String())
	return err
}

// tag points each tag at digest, where it does not already: a manifest
// PUT, no blob moves.
func (b *Builder) tag(ctx context.Context, repo name.Repository, digest string, tags []string) error {
	var desc *remote.Descriptor
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range tags {
		g.Go(func() error {
			ref := repo.Tag(t)
			if cur, err := b.Registry.Digest(gctx, ref.String()); err == nil && cur == digest {
				return nil
			}
			mu.Lock()
			if desc == nil {
				d, err := remote.Get(repo.Digest(digest), b.Registry.Options(gctx)...)
				if err != nil {
					mu.Unlock()
					return fmt.Errorf("reading %s@%s: %w", repo, digest, err)
				}
				desc = d
			}
			d := desc
			mu.Unlock()
			err := remote.Tag(ref, d, b.Registry.PushOptions(gctx)...)
			b.Registry.Forget(ref.String())
			if err != nil {
				return fmt.Errorf("tagging %s: %w", ref, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// origin says where an Image was read from: " (FILE:LINE)" for a file's,
// nothing for a cluster's resource (its name says it).
func origin(img config.Image) string {
	if img.Origin.Line == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s:%d)", img.Origin.File, img.Origin.Line)
}
