package hydrate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sluice.dev/sluice/internal/config"
)

// InvalidError is returned by RunFiles when the resources do not load:
// nothing ran.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// RunFiles loads the ManifestSyncs in the given files and directories and
// runs those named (all when names is empty). When any resource is invalid
// nothing runs and every problem is returned, as an *InvalidError.
func RunFiles(ctx context.Context, paths, names []string, o Options) (*Report, error) {
	start := time.Now()
	set, err := config.Load(paths...)
	if err != nil {
		return nil, &InvalidError{err}
	}
	// The person's own files name the repositories their credentials
	// are for.
	o.Cache.Trust(set.Repos()...)
	if o.Log != nil {
		o.Log.Debug("loaded", "syncs", len(set.ManifestSyncs), "elapsed", time.Since(start))
	}
	syncs, err := set.Named(names)
	if err != nil {
		return nil, &InvalidError{fmt.Errorf("%w in %s", err, strings.Join(paths, " "))}
	}
	return Run(ctx, syncs, o)
}
