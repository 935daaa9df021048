package hydrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// sourceTree is what a sync reads: a commit's tree, or a working tree.
type sourceTree struct {
	*source.Opened
}

// provenance records the source, with whether a working tree differed
// from its HEAD in any file the render read.
func (s *sourceTree) provenance(spec v1alpha1.Source, inputs []v1alpha1.Input) v1alpha1.ProvenanceSource {
	ps := v1alpha1.ProvenanceSource{Repo: source.Redact(spec.Repo), Ref: s.Ref, Commit: s.Commit, Path: spec.Path}
	if s.Tree != nil {
		ps.Tree, _ = s.Tree.TreeHash(spec.Path)
	}
	if s.Tree == nil {
		ps.Dirty = s.Head == nil || !source.Unchanged(s.Head, inputs, nil)
		if s.Commit == "" {
			ps.Dirty = false // not in git: nothing to differ from
		}
	}
	return ps
}

// openSource opens a sync's source.
func (r *runner) openSource(ctx context.Context, ms config.ManifestSync) (*sourceTree, error) {
	creds, _ := r.o.credentials(ms)
	o, err := r.o.Cache.OpenSourceWith(ctx, ms.Spec.Source.Repo, ms.Spec.Source.Ref, ms.Origin.Dir, creds)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if o.Working() {
		render.Warm() // a working tree is read anew each run: renders are likely
	}
	return &sourceTree{o}, nil
}

// takeover completes a takeover record with the state of the working tree
// rendered: its HEAD, and a hash of its uncommitted changes to what the
// render read.
func (s *sourceTree) takeover(t v1alpha1.Takeover, inputs []v1alpha1.Input) *v1alpha1.Takeover {
	t.Commit = s.Commit
	if s.Working() && (s.Head == nil || !source.Unchanged(s.Head, inputs, nil)) {
		h := sha256.New()
		for _, in := range inputs {
			fmt.Fprintf(h, "%s %s\n", in.Path, in.Hash)
		}
		t.Diff = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return &t
}
