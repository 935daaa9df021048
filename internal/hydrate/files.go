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
	syncs := set.ManifestSyncs
	if len(names) > 0 {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		syncs = nil
		for _, s := range set.ManifestSyncs {
			if want[s.Name] {
				syncs = append(syncs, s)
				delete(want, s.Name)
			}
		}
		if len(want) > 0 {
			var missing []string
			for n := range want {
				missing = append(missing, n)
			}
			return nil, &InvalidError{fmt.Errorf("no ManifestSync named %s in %s", strings.Join(missing, ", "), strings.Join(paths, " "))}
		}
	}
	if len(syncs) == 0 {
		return nil, &InvalidError{fmt.Errorf("no ManifestSync found in %s", strings.Join(paths, " "))}
	}
	return Run(ctx, syncs, o)
}
