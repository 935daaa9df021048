// Package takeover points the very configuration an environment is
// hydrated from at a developer's branch or working tree for a while: the
// sources read from there (uncommitted changes included, nothing committed
// or pushed), the images asked for built from there under a mutable
// deployment tag, every other image left on the digest it has, and the
// destination folders locked for the developer until the takeover expires
// or is released.
package takeover

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"regexp"
	"strings"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/repoconfig"
	"sluice.dev/sluice/internal/source"
)

// MaxDuration bounds a takeover's lock.
const MaxDuration = 12 * time.Hour

// Options configure a takeover.
type Options struct {
	// Paths hold the ManifestSyncs, RepoConfigs and Images the regular
	// deployment uses.
	Paths []string
	// Dir is the base of relative paths in Local and Overrides; the
	// default is the working directory.
	Dir string
	// Local reads repositories from working trees: REPO=PATH, or PATH for
	// the repository of the working tree it is in.
	Local []string
	// Overrides are FROM=TO repository overrides (a branch: URL?ref=B).
	Overrides []string
	// Tag is the mutable deployment tag; the default is dev-USER.
	Tag string
	// Build names the Images built from the (overridden) sources and
	// pushed under Tag; every other image keeps its digest, or takes
	// Tag's where that exists.
	Build []string
	// For is how long the lock holds; the default is 2 hours, the most 12.
	For time.Duration
	// Steal takes folders another developer's takeover locks.
	Steal bool
	// Owner is user@host; the default is this process's.
	Owner string
	// Cache, Builder and Hydrate are the engines (Hydrate's Takeover,
	// Steal and Release are set here).
	Cache   *source.Cache
	Builder *build.Builder
	Hydrate hydrate.Options
	// Now is the clock; the default is time.Now.
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		o.Dir = wd
	}
	if o.Owner == "" {
		o.Owner = Owner()
	}
	if o.Tag == "" {
		o.Tag = DefaultTag()
	}
	if err := v1alpha1.ValidateTag(o.Tag); err != nil {
		return fmt.Errorf("--tag: %w", err)
	}
	if o.For == 0 {
		o.For = 2 * time.Hour
	}
	if o.For < 0 || o.For > MaxDuration {
		return fmt.Errorf("--for %s: a takeover lasts at most %s", o.For, MaxDuration)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Owner is user@host of this process.
func Owner() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

var notTag = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// DefaultTag is dev-USER.
func DefaultTag() string {
	name := "user"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return "dev-" + strings.Trim(notTag.ReplaceAllString(name, "-"), "-")
}

// Take runs a takeover: the resources load through the overrides, the
// images asked for are built and pushed under the deployment tag, the
// others only tagged with it (where it does not exist yet, at the digest
// their own tag resolves to), and the syncs hydrate with every image
// following that tag, their folders recording the takeover and locked
// until it expires.
func Take(ctx context.Context, o Options) (*repoconfig.Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	extra, err := o.overrides()
	if err != nil {
		return nil, err
	}
	l, err := repoconfig.Load(ctx, o.Cache, o.Paths, extra)
	if err != nil {
		return nil, err
	}
	// Every Image's repository follows the deployment tag.
	var tagged override.Set
	for _, img := range l.Set.Images {
		tagged.Images = append(tagged.Images, v1alpha1.ImageOverride{Name: img.Spec.Image, Tag: o.Tag})
	}
	if _, err := tagged.Apply(l.Set); err != nil {
		return nil, err
	}
	build := o.Build
	if build == nil {
		build = []string{}
	}
	h := o.Hydrate
	h.Takeover = &v1alpha1.Takeover{Owner: o.Owner, Tag: o.Tag, Expires: o.Now().Add(o.For).UTC().Format(time.RFC3339)}
	h.Steal = o.Steal
	h.Now = o.Now
	return repoconfig.Reconcile(ctx, l, repoconfig.Options{Hydrate: h, Builder: o.Builder, Build: build, Tags: []string{o.Tag}, Retag: o.Tag})
}

// Release hands the folders back: the regular configuration (no
// overrides) is hydrated, lifting the owner's locks. Folders another
// owner locks stay locked unless Steal.
func Release(ctx context.Context, o Options) (*repoconfig.Report, error) {
	if o.Owner == "" {
		o.Owner = Owner()
	}
	l, err := repoconfig.Load(ctx, o.Cache, o.Paths, override.Set{})
	if err != nil {
		return nil, err
	}
	h := o.Hydrate
	h.Release, h.Steal = o.Owner, o.Steal
	if o.Now != nil {
		h.Now = o.Now
	}
	return repoconfig.Reconcile(ctx, l, repoconfig.Options{Hydrate: h, Builder: o.Builder, Build: []string{}})
}

func (o *Options) overrides() (override.Set, error) {
	var s override.Set
	for _, l := range o.Local {
		r, err := override.Local(l, o.Dir)
		if err != nil {
			return s, err
		}
		s.Repos = append(s.Repos, r)
	}
	for _, spec := range o.Overrides {
		r, err := override.Parse(spec, o.Dir)
		if err != nil {
			return s, err
		}
		s.Repos = append(s.Repos, r)
	}
	return s, nil
}
