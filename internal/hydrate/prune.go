package hydrate

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/source"
)

// errNothingToPrune ends a prune's edit that finds no folder of the
// sync's: nothing is committed.
var errNothingToPrune = errors.New("nothing to prune")

// Prune removes a deleted sync's folder from its destination branch, as
// spec.prune asks: in push mode in one commit, if the folder is still the
// sync's (its provenance record names it) and no takeover holds it, both
// checked again on the branch as each push attempt finds it, so that a
// folder another sync or a developer claims meanwhile is left alone; in
// pullRequest mode through the branch's pull request (Withdraw), which
// is returned. Review branches (branch mode) are the forge's to close:
// nothing is done.
func Prune(ctx context.Context, ms config.ManifestSync, o Options) (*v1alpha1.PullRequestStatus, error) {
	d := ms.Spec.Destination
	if d.IsOCI() {
		return nil, pruneArtifact(ctx, ms, o)
	}
	switch d.Mode {
	case v1alpha1.ModeBranch:
		return nil, nil
	case v1alpha1.ModePullRequest:
		return Withdraw(ctx, ms, o)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	repo, err := openDestinationRepo(ctx, ms, o)
	if err != nil {
		return nil, err
	}
	folder := strings.Trim(path.Clean(d.Path), "/")
	who := ms.Name
	if ms.Namespace != "" {
		who = ms.Namespace + "/" + ms.Name
	}
	_, err = destination.Write(ctx, repo, d.Branch, nil, destination.WriteOptions{
		Author:  o.Author,
		Signer:  o.signerOf(ms),
		Message: fmt.Sprintf("sluice: remove %s (ManifestSync %s deleted, spec.prune)", folder, who),
		Edit: func(b *destination.Branch) ([]destination.Change, error) {
			if !b.Exists() {
				return nil, errNothingToPrune
			}
			prov, err := ReadProvenance(b, folder)
			if err != nil {
				return nil, err
			}
			if prov == nil || prov.Sync != ms.Name || (prov.Namespace != "" && prov.Namespace != ms.Namespace) {
				return nil, errNothingToPrune // nothing there, not Sluice's, or another sync's now
			}
			if t := prov.Takeover; t != nil && t.Holds(now()) {
				return nil, fmt.Errorf("%s's takeover holds %s until %s: the folder is removed once it ends", t.Owner, folder, t.Expires)
			}
			hashes, err := b.Hashes(folder)
			if err != nil {
				return nil, err
			}
			for f := range hashes {
				if strings.HasSuffix(f, "/"+v1alpha1.ProvenanceFile) {
					data, _, _ := b.ReadFile(path.Join(folder, f))
					return nil, fmt.Errorf("%s holds %s, the folder of ManifestSync %s: it is not removed with %s", folder, path.Join(folder, path.Dir(f)), syncOf(data), who)
				}
			}
			return []destination.Change{{Path: folder}}, nil
		},
	})
	if errors.Is(err, destination.ErrNoChange) || errors.Is(err, errNothingToPrune) {
		return nil, nil
	}
	return nil, err
}

// openDestinationRepo opens the repository a sync writes, with its own
// credentials.
func openDestinationRepo(ctx context.Context, ms config.ManifestSync, o Options) (*source.Repo, error) {
	loc, err := source.ParseLocation(ms.Spec.Destination.Repo, ms.Origin.Dir)
	if err != nil {
		return nil, fmt.Errorf("spec.destination.repo: %w", err)
	}
	_, creds := o.credentials(ms)
	repo, err := o.Cache.Open(ctx, loc, source.OpenOptions{Credentials: creds})
	if err != nil {
		return nil, fmt.Errorf("opening destination: %w", err)
	}
	return repo, nil
}
