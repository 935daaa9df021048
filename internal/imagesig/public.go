package imagesig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sigstore/sigstore-go/pkg/tuf"
)

// PublicRoot is Sigstore's public trusted root kept current through its
// TUF repository, as cosign and sigstore-go keep theirs: fetched when a
// keyless check first needs it, again once Period has passed (in the
// background: checks go on with the root they have), its metadata
// verified from the TUF root sigstore-go embeds and cached on disk.
// While the repository cannot be reached a fresh cached copy is used, and
// failing that the trusted_root.json embedded in Sluice (PublicGood),
// said once in the log.
type PublicRoot struct {
	// CacheDir keeps the TUF metadata and targets.
	CacheDir string
	// Mirror is the TUF repository (default tuf-repo-cdn.sigstore.dev).
	Mirror string
	// TUFRoot is the repository's trust anchor (default: the public
	// instance's, embedded in sigstore-go).
	TUFRoot []byte
	// Period is how long a fetched root is used before it is fetched
	// again (default a day); a failed fetch is tried again after a tenth
	// of it.
	Period time.Duration
	// Timeout bounds one fetch (default 20 seconds).
	Timeout time.Duration
	// Log says when the embedded root stands in.
	Log *slog.Logger

	mu         sync.Mutex
	current    *TrustedRoot
	due        time.Time
	refreshing bool
	fetch      sync.Mutex // one fetch at a time
}

// trustedRootTarget is the target of Sigstore's TUF repository holding
// the trusted root.
const trustedRootTarget = "trusted_root.json"

// Root is the trusted root to check keyless signatures of the public
// instance with. The first call fetches it (bounded by Timeout); later
// ones answer at once.
func (p *PublicRoot) Root(ctx context.Context) *TrustedRoot {
	p.mu.Lock()
	cur, due := p.current, p.due
	if cur != nil {
		if time.Now().After(due) && !p.refreshing {
			p.refreshing = true
			go func() {
				p.load(context.WithoutCancel(ctx))
				p.mu.Lock()
				p.refreshing = false
				p.mu.Unlock()
			}()
		}
		p.mu.Unlock()
		return cur
	}
	p.mu.Unlock()
	return p.load(ctx)
}

// load fetches the root and keeps it (or what stands in for it).
func (p *PublicRoot) load(ctx context.Context) *TrustedRoot {
	p.fetch.Lock()
	defer p.fetch.Unlock()
	p.mu.Lock()
	if p.current != nil && time.Now().Before(p.due) {
		cur := p.current
		p.mu.Unlock()
		return cur
	}
	p.mu.Unlock()
	period := p.Period
	if period <= 0 {
		period = 24 * time.Hour
	}
	r, err := p.fetchRoot(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.current == nil {
			p.current = PublicGood()
		}
		p.due = time.Now().Add(period / 10)
		if p.Log != nil {
			p.Log.Warn("Sigstore's trusted root could not be fetched; checking keyless signatures with the root at hand", "mirror", p.mirror(), "err", err)
		}
		return p.current
	}
	p.current, p.due = r, time.Now().Add(period)
	return r
}

func (p *PublicRoot) mirror() string {
	if p.Mirror != "" {
		return p.Mirror
	}
	return tuf.DefaultMirror
}

// fetchRoot asks the TUF repository for the trusted root: online, or from
// the cache while its metadata has not expired.
func (p *PublicRoot) fetchRoot(ctx context.Context) (*TrustedRoot, error) {
	if p.CacheDir == "" {
		return nil, errors.New("no cache directory for Sigstore's TUF metadata")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	opts := tuf.DefaultOptions()
	opts.CachePath = p.CacheDir
	opts.RepositoryBaseURL = p.mirror()
	if p.TUFRoot != nil {
		opts.Root = p.TUFRoot
	}
	type answer struct {
		data []byte
		err  error
	}
	get := func(o *tuf.Options) answer {
		c, err := tuf.New(o)
		if err != nil {
			return answer{err: err}
		}
		data, err := c.GetTarget(trustedRootTarget)
		return answer{data, err}
	}
	// The TUF client takes no context: a fetch past the timeout is left
	// to end on its own (its fetcher has timeouts of its own).
	done := make(chan answer, 1)
	go func() {
		a := get(opts)
		if a.err != nil {
			// Offline: the cached metadata, while it has not expired.
			cached := *opts
			cached.ForceCache = true
			if c := get(&cached); c.err == nil {
				a = c
			}
		}
		done <- a
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(timeout):
		return nil, fmt.Errorf("%s did not answer within %s", p.mirror(), timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.err != nil {
		return nil, fmt.Errorf("%s: %w", p.mirror(), a.err)
	}
	r, err := ParseTrustedRoot(a.data)
	if err != nil {
		return nil, fmt.Errorf("the %s of %s: %w", trustedRootTarget, p.mirror(), err)
	}
	return r, nil
}
