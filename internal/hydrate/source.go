package hydrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
)

// sourceTree is what a sync reads: a commit's tree, or a working tree.
type sourceTree struct {
	*source.Opened
	// signedBy is who signed it, when spec.source.verify checked it.
	signedBy string
}

// provenance records the source, with whether a working tree differed
// from its HEAD in any file the render read.
func (s *sourceTree) provenance(spec v1alpha1.Source, inputs []v1alpha1.Input) v1alpha1.ProvenanceSource {
	ps := v1alpha1.ProvenanceSource{Repo: source.Redact(spec.Repo), Ref: s.Ref, Commit: s.Commit, Path: spec.Path, SignedBy: s.signedBy}
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
	signedBy, err := r.o.verify(ms, o)
	if err != nil {
		return nil, err
	}
	return &sourceTree{Opened: o, signedBy: signedBy}, nil
}

// VerificationError is a source whose commit or tag does not carry a
// signature of a trusted key (spec.source.verify).
type VerificationError struct {
	// What names the commit or tag, and where it is.
	What string
	Err  error
}

func (e *VerificationError) Error() string {
	return fmt.Sprintf("spec.source.verify: %s: %v", e.What, e.Err)
}

func (e *VerificationError) Unwrap() error { return e.Err }

// verify checks the signatures spec.source.verify asks for, and says
// whose they are. A working tree is the developer's own work: it is not
// checked.
func (o *Options) verify(ms config.ManifestSync, src *source.Opened) (string, error) {
	v := ms.Spec.Source.Verify
	if v == nil || src.Working() || src.Tree == nil {
		return "", nil
	}
	where := source.Redact(ms.Spec.Source.Repo)
	var verifier *signing.Verifier
	var err error
	if o.VerifierFor != nil {
		verifier, err = o.VerifierFor(ms)
	}
	if err != nil {
		return "", &VerificationError{What: where, Err: err}
	}
	if verifier == nil {
		return "", &VerificationError{What: where, Err: fmt.Errorf("no trusted keys to check it with (the controller reads them from spec.source.verify.secretRef)")}
	}
	repo := src.Tree.Repo()
	var checks []source.Signed
	if v.Mode == v1alpha1.VerifyTag || v.Mode == v1alpha1.VerifyTagAndHEAD {
		t, err := repo.SignedTag(src.Ref)
		if err != nil {
			return "", &VerificationError{What: where, Err: err}
		}
		checks = append(checks, t)
	}
	if v.Mode != v1alpha1.VerifyTag {
		c, err := repo.SignedCommit(plumbing.NewHash(src.Commit))
		if err != nil {
			return "", &VerificationError{What: where, Err: err}
		}
		checks = append(checks, c)
	}
	var signers []string
	for _, c := range checks {
		who, err := verifier.Verify(c.Payload, c.Signature)
		if err != nil {
			return "", &VerificationError{What: c.What + " of " + where, Err: err}
		}
		if !slices.Contains(signers, who) {
			signers = append(signers, who)
		}
	}
	return strings.Join(signers, ", "), nil
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
