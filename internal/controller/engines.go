package controller

import (
	"cmp"
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// engines are what every reconcile shares: one clone per repository (and
// per Secret that reads it), one registry client per set of registry
// credentials, all of them under one per-host rate limit.
type engines struct {
	cache    *source.Cache
	egress   *egress.Policy
	limiter  *registry.Limiter
	insecure []string
	chartDir string
	limits   render.Limits
	// guard is asked before each push to git and each OCI tag moved.
	guard func(context.Context) error

	mu      sync.Mutex
	clients map[string]*regClient
	// moved is told of each tag a look-up in the background found moved
	// (see registry.WithRevalidate); set once, before the first reconcile.
	moved func(registry.Change)
}

// regClient is the registry client (and chart fetcher) of one identity:
// "anonymous", or a Secret ("namespace/name@resourceVersion": a rotated
// Secret gets a new client, the old one is dropped once unused).
type regClient struct {
	reg    *registry.Client
	charts *render.Charts
	used   time.Time
}

// guard, when set, is asked before each push (see leader.stillLeads);
// stall bounds a git request that moves nothing.
func newEngines(dir string, rps float64, insecure []string, limits render.Limits, policy *egress.Policy, guard func(context.Context) error, stall time.Duration) *engines {
	return &engines{
		guard: guard,
		// Clones are fetched per the syncs' intervals (and at once when a
		// webhook or a person asks): never by the Cache's own age.
		cache: source.NewCache(filepath.Join(dir, "git"), source.WithObserver(observeGit), source.WithFetchHook(render.Warm),
			source.WithEgress(policy), source.WithPushGuard(guard), source.WithStallTimeout(cmp.Or(stall, source.DefaultStallTimeout))),
		egress:   policy,
		limiter:  registry.NewLimiter(rps, observeRegistry),
		insecure: insecure,
		chartDir: filepath.Join(dir, "charts"),
		limits:   limits,
		clients:  map[string]*regClient{},
	}
}

// unusedFor is how long a registry client of a Secret is kept unused.
const unusedFor = time.Hour

// registry is the client of one identity, made on first use.
func (e *engines) registry(identity string, kc authn.Keychain) *regClient {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	c, ok := e.clients[identity]
	if !ok {
		if kc == nil {
			kc = authn.NewMultiKeychain() // anonymous: never the controller's own docker config
		}
		opts := []registry.Option{registry.WithLimiter(e.limiter), registry.WithInsecure(e.insecure...), registry.WithKeychain(kc),
			registry.WithTransport(e.egress.Guard(remote.DefaultTransport.(*http.Transport))), registry.WithRevalidate(e.tagMoved)}
		reg := registry.New(opts...)
		c = &regClient{reg: reg, charts: &render.Charts{Registry: reg, CacheDir: e.chartDir, HTTP: e.egress.Client()}, used: now}
		e.clients[identity] = c
		for id, old := range e.clients {
			if now.Sub(old.used) > unusedFor {
				delete(e.clients, id)
			}
		}
	}
	c.used = now
	return c
}

func (e *engines) tagMoved(ch registry.Change) {
	e.mu.Lock()
	f := e.moved
	e.mu.Unlock()
	if f != nil {
		f(ch)
	}
}

// forget drops what every client remembers of a tag: a registry said it
// moved.
func (e *engines) forget(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.clients {
		c.reg.Forget(ref)
	}
}
