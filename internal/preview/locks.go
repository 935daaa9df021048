package preview

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
)

// MaxLock is the longest a lock may be extended to from now, as long as a
// takeover may take.
const MaxLock = 12 * time.Hour

// Release lifts owner's takeover lock on a sync's folder: the sync is
// hydrated from its regular configuration, and the folder committed back
// to it.
func (p *Previewer) Release(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync, owner string) (hydrate.Result, error) {
	ms, o, err := p.options(ctx, secrets, obj)
	if err != nil {
		return hydrate.Result{}, err
	}
	o.Release, o.Steal = owner, true
	rep, err := hydrate.Run(ctx, []config.ManifestSync{ms}, o)
	if err != nil {
		return hydrate.Result{}, err
	}
	r := rep.Results[0]
	return r, r.Err
}

// Extend moves owner's lock on a sync's folder to expire at until (at
// most MaxLock from now), and returns the commit that says so.
func (p *Previewer) Extend(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync, owner string, until time.Time) (string, error) {
	if d := time.Until(until); d > MaxLock+time.Minute || d <= 0 {
		return "", fmt.Errorf("a lock is extended to between now and %s from now", MaxLock)
	}
	ms, o, err := p.options(ctx, secrets, obj)
	if err != nil {
		return "", err
	}
	return hydrate.ExtendLock(ctx, ms, o, owner, until)
}
