package repoconfig

import (
	"context"
	"fmt"
	"strings"

	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
)

// Options configure Reconcile.
type Options struct {
	// Hydrate configures the syncs' hydration; its Overrides are set from
	// what was loaded.
	Hydrate hydrate.Options
	// Builder builds the Images; it should share Hydrate's Registry, so
	// the syncs pin what was just pushed.
	Builder *build.Builder
	// Build names the Images to build. nil builds every Image (those whose
	// inputs were built before are only tagged); an empty list, none.
	Build []string
	// Tags are pushed for every image built (a deployment tag).
	Tags []string
	// Retag gives the Images not built this tag without building them
	// (see build.Builder.Retag): a takeover's deployment tag.
	Retag string
}

// Report is what a reconcile did.
type Report struct {
	Sources []string       `json:"sources,omitempty"`
	Images  []build.Result `json:"images"`
	// Retagged are the Images given the deployment tag without a build.
	Retagged []build.Result   `json:"retagged,omitempty"`
	Syncs    []hydrate.Result `json:"syncs"`
}

// Err summarises the failures, nil when there are none.
func (r *Report) Err() error {
	var failed []string
	for _, i := range append(append([]build.Result(nil), r.Images...), r.Retagged...) {
		if i.Err != nil {
			failed = append(failed, "Image "+i.Name)
		}
	}
	for _, s := range r.Syncs {
		if s.Result == hydrate.Failed {
			failed = append(failed, "ManifestSync "+s.Name)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d failed: %s", len(failed), strings.Join(failed, ", "))
}

// Changed reports whether anything was built or committed.
func (r *Report) Changed() bool {
	for _, i := range r.Images {
		if i.Built {
			return true
		}
	}
	return (&hydrate.Report{Results: r.Syncs}).Changed()
}

// Reconcile builds the loaded Images, then hydrates the ManifestSyncs, so
// they pin what was just built.
func Reconcile(ctx context.Context, l *Loaded, o Options) (*Report, error) {
	images, err := Select(l.Set.Images, o.Build)
	if err != nil {
		return nil, err
	}
	rep := &Report{Sources: l.Sources}
	if len(images) > 0 {
		rep.Images = o.Builder.Build(ctx, images, build.Options{Tags: o.Tags})
	}
	if o.Retag != "" {
		var others []config.Image
		for _, img := range l.Set.Images {
			if !contains(images, img.Name) {
				others = append(others, img)
			}
		}
		if len(others) > 0 {
			rep.Retagged = o.Builder.Retag(ctx, others, o.Retag)
		}
	}
	if len(l.Set.ManifestSyncs) > 0 {
		o.Hydrate.Overrides = l.Overrides
		h, err := hydrate.Run(ctx, l.Set.ManifestSyncs, o.Hydrate)
		if err != nil {
			return rep, err
		}
		rep.Syncs = h.Results
	}
	return rep, nil
}

// Select returns the Images named (all for nil), in the order found; a
// name no Image has is an error.
func Select(all []config.Image, names []string) ([]config.Image, error) {
	if names == nil {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []config.Image
	for _, img := range all {
		if want[img.Name] {
			out = append(out, img)
			delete(want, img.Name)
		}
	}
	if len(want) > 0 {
		var missing, known []string
		for n := range want {
			missing = append(missing, n)
		}
		for _, img := range all {
			known = append(known, img.Name)
		}
		return nil, fmt.Errorf("no Image named %s (found: %s)", strings.Join(missing, ", "), strings.Join(known, ", "))
	}
	return out, nil
}

func contains(images []config.Image, name string) bool {
	for _, img := range images {
		if img.Name == name {
			return true
		}
	}
	return false
}
