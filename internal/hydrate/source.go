package hydrate

import (
	"context"
	"errors"
	"fmt"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// sourceTree is what a sync reads: a commit's tree, or a working tree.
type sourceTree struct {
	loc    source.Location
	ref    string
	fs     source.FS
	commit string // the commit read; for a working tree, its HEAD ("" outside git)
	tree   *source.TreeFS
	head   source.FS // a working tree's HEAD, to tell whether it is dirty
}

func (s *sourceTree) describe() string {
	if s.commit == "" {
		return s.loc.String()
	}
	return s.loc.String() + "@" + short(s.commit)
}

// provenance records the source, with whether a working tree differed
// from its HEAD in any file the render read.
func (s *sourceTree) provenance(spec v1alpha1.Source, inputs []v1alpha1.Input) v1alpha1.ProvenanceSource {
	ps := v1alpha1.ProvenanceSource{Repo: source.Redact(spec.Repo), Ref: s.ref, Commit: s.commit, Path: spec.Path}
	if s.tree != nil {
		ps.Tree, _ = s.tree.TreeHash(spec.Path)
	}
	if s.tree == nil {
		ps.Dirty = s.head == nil || !source.Unchanged(s.head, inputs, nil)
		if s.commit == "" {
			ps.Dirty = false // not in git: nothing to differ from
		}
	}
	return ps
}

// openSource opens a sync's source: a local path without a ref is read as
// it is on disk; anything else at the commit its ref names.
func (r *runner) openSource(ctx context.Context, ms config.ManifestSync) (*sourceTree, error) {
	loc, err := source.ParseLocation(ms.Spec.Source.Repo, ms.Origin.Dir)
	if err != nil {
		return nil, fmt.Errorf("spec.source.repo: %w", err)
	}
	ref := ms.Spec.Source.Ref
	if loc.Ref != "" {
		ref = loc.Ref
	}
	st := &sourceTree{loc: loc, ref: ref}
	if loc.IsLocal() && ref == "" {
		render.Warm() // a working tree is read anew each run: renders are likely
		dir, err := source.Dir(loc.Path)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", loc, err)
		}
		st.fs = dir
		repo, err := r.o.Cache.Open(ctx, loc, source.OpenOptions{})
		if errors.Is(err, source.ErrNotRepository) {
			return st, nil
		}
		if err != nil {
			return nil, err
		}
		if c, err := repo.Resolve(""); err == nil {
			st.commit = c.Hash.String()
			if head, err := repo.Tree(c); err == nil {
				st.head = head
			}
		}
		return st, nil
	}
	repo, err := r.o.Cache.Open(ctx, loc, source.OpenOptions{})
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	c, err := repo.Resolve(ref)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	tree, err := repo.Tree(c)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", loc, err)
	}
	st.fs, st.tree, st.commit = tree, tree, c.Hash.String()
	return st, nil
}
