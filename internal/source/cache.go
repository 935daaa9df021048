package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/egress"
)

// Cache opens repositories: remote ones through clones kept under one
// directory, fetched at most once per Cache however often they are opened;
// local ones in place. A Cache is meant to live for one run.
type Cache struct {
	dir     string
	creds   *credentials
	egress  *egress.Policy
	onFetch func()
	observe func(op string)
	guard   func(ctx context.Context) error
	stall   time.Duration
	maxAge  time.Duration

	// objects caches the clones' decoded objects (delta bases, recent
	// reads), one bound for all of them: go-git's default is 96 MiB for
	// each repository, which a controller's hundreds of clones would
	// fill over days. Objects are named by their content, and a clone
	// finds an object in its own packs before it looks here, so sharing
	// shows no clone an object it does not hold.
	objects *objectCache
	// holding counts the clones that may hold pack files open: handed
	// out since their files were last closed.
	holding atomic.Int64

	mu    sync.Mutex
	swept time.Time // when idle clones' files were last closed
	repos map[string]*openCall
	// failing holds each clone's backoff (by the key of repos), kept when
	// a failed first Open leaves repos.
	failing map[string]*backoff.Failures
}

type openCall struct {
	done chan struct{}
	repo *Repo
	err  error
}

// Option configures a Cache.
type Option func(*Cache)

// WithAuth sets the credentials for remotes. The default is none (anonymous
// https, ssh agent).
func WithAuth(a Auth) Option { return func(c *Cache) { c.creds.auth = a } }

// Trust lets the credentials go to the hosts of these repository URLs
// too: those the person running Sluice named in their own files and
// flags. A repository named only by what a source holds (a remote
// kustomize base, a ManifestSync found by a RepoConfig) is not trusted by
// being named.
func (c *Cache) Trust(urls ...string) {
	c.creds.trust(Auth{}.Trusting(urls...).Hosts...)
}

// TrustedHosts are the hosts (host, or host:port) the credentials are
// for: those of the environment and of the repositories the caller
// trusts. What a person's own files name is theirs to reach.
func (c *Cache) TrustedHosts() []string {
	c.creds.mu.Lock()
	defer c.creds.mu.Unlock()
	out := make([]string, 0, len(c.creds.auth.Hosts))
	for _, h := range c.creds.auth.Hosts {
		if _, rest, ok := strings.Cut(h, "://"); ok {
			h = rest
		}
		out = append(out, h)
	}
	return out
}

// WithFetchHook calls f when a clone is about to fetch new commits, the
// first sign that a run has work ahead (a caller can start warming up).
func WithFetchHook(f func()) Option { return func(c *Cache) { c.onFetch = f } }

// WithObserver calls f for each request to a remote: "ls-remote" (a ref
// advertisement), "fetch" (objects), "push". For metrics.
func WithObserver(f func(op string)) Option { return func(c *Cache) { c.observe = f } }

// WithPushGuard asks f before each push (a branch updated or deleted,
// on a remote or on disk): an error refuses the push, and is returned.
// A controller replica checks it still leads, so that work it had in
// flight when it lost its lease never lands (see controller.Run).
func WithPushGuard(f func(ctx context.Context) error) Option {
	return func(c *Cache) { c.guard = f }
}

// WithMaxAge makes a long-lived Cache (a controller's) fetch a remote again
// when it is opened and its last fetch is older than d: at most once per d
// however many callers open it, and at the cost of one ref advertisement
// when nothing moved. The default, 0, fetches once per Cache (a run). A
// caller's context may ask for its own age (ContextWithMaxAge).
func WithMaxAge(d time.Duration) Option { return func(c *Cache) { c.maxAge = d } }

type maxAgeKey struct{}

// ContextWithMaxAge asks the Opens under ctx for clones fetched at most d
// ago: a sync's interval.
func ContextWithMaxAge(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxAgeKey{}, d)
}

type notBeforeKey struct{}

// ContextWithNotBefore asks the Opens under ctx for clones fetched at t or
// later: a webhook or a person asked at t for what the remote holds now.
// Every caller asking with the same t shares one fetch.
func ContextWithNotBefore(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, notBeforeKey{}, t)
}

func notBefore(ctx context.Context) time.Time {
	t, _ := ctx.Value(notBeforeKey{}).(time.Time)
	return t
}

func maxAge(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Value(maxAgeKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return def
}

// NewCache returns a Cache keeping clones under dir.
func NewCache(dir string, opts ...Option) *Cache {
	installGitTransports()
	c := &Cache{dir: dir, repos: map[string]*openCall{}, creds: &credentials{}, stall: DefaultStallTimeout,
		objects: newObjectCache(objectCacheSize, objectIdle)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// DefaultDir is the clone cache under the user's cache directory.
func DefaultDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "sluice", "git"), nil
}

// OpenOptions say how to open a repository.
type OpenOptions struct {
	// Create initialises a bare repository at a local path that does not
	// exist yet (or is an empty directory), as a destination may need.
	Create bool
	// Credentials, if set, are the repository's own, instead of the
	// Cache's: a controller's resources each name theirs.
	Credentials *Credentials
}

// Credentials are one resource's credentials for one repository. Clones
// are kept apart by Scope: a resource that names no Secret does not read,
// from a clone that another resource's Secret fetched, what it could not
// fetch itself.
type Credentials struct {
	Auth Auth
	// Scope names the credentials ("namespace/secret"): a later Open of
	// the same scope with another Auth (a rotated Secret) uses the new
	// one from then on, on the same clone.
	Scope string
}

// Open returns the repository at loc. A remote is cloned on first use and
// fetched on the first Open of this Cache. A local path is opened in place:
// as a destination (Create) it must be a repository itself; as a source it
// may be a folder inside one.
func (c *Cache) Open(ctx context.Context, loc Location, o OpenOptions) (*Repo, error) {
	r, err := c.open(ctx, loc, o)
	if r != nil {
		r.opened.Store(time.Now().UnixNano())
		if r.remote && !r.holding.Swap(true) {
			c.holding.Add(1)
		}
	}
	c.closeIdle(time.Now())
	return r, err
}

func (c *Cache) open(ctx context.Context, loc Location, o OpenOptions) (*Repo, error) {
	key := loc.Key()
	if loc.IsLocal() && !o.Create {
		key = "source:" + key
	}
	if o.Credentials != nil && !loc.IsLocal() {
		key += "\x00" + o.Credentials.Scope
	}
	c.mu.Lock()
	call, ok := c.repos[key]
	if !ok {
		call = &openCall{done: make(chan struct{})}
		c.repos[key] = call
	}
	c.mu.Unlock()
	if ok {
		select {
		case <-call.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if call.err == nil && call.repo.remote {
			if why := call.repo.health(); why != nil {
				// A damaged clone is cloned again, once, here.
				if err := c.forget(key, call); err != nil {
					return nil, fmt.Errorf("%s: the cached clone is damaged (%v), and removing it failed: %w", loc, why, err)
				}
				return c.open(ctx, loc, o)
			}
		}
		if call.err == nil && o.Credentials != nil && call.repo.remote {
			call.repo.creds.set(o.Credentials.Auth.Trusting(loc.URL))
		}
		age, nb := maxAge(ctx, c.maxAge), notBefore(ctx)
		if call.err == nil && (age > 0 || !nb.IsZero()) && call.repo.remote {
			if err := call.repo.refreshIfOlder(ctx, age, nb); err != nil {
				return nil, err
			}
		}
		return call.repo, call.err
	}
	longLived := maxAge(ctx, c.maxAge) > 0 || !notBefore(ctx).IsZero()
	switch {
	case loc.IsLocal():
		call.repo, call.err = openLocal(loc, o.Create)
	case !longLived:
		call.repo, call.err = c.openRemote(ctx, loc, o.Credentials, &backoff.Failures{})
	default:
		// A long-lived cache shares a failure until its backoff ends.
		f := c.failuresOf(key)
		creds := c.credsKey(o.Credentials)
		if call.err = f.Shared(time.Now(), notBefore(ctx), creds); call.err == nil {
			octx, ra := backoff.WithRetryAfter(ctx)
			call.repo, call.err = c.openRemote(octx, loc, o.Credentials, f)
			call.err = f.Record(ctx, call.err, ra.Get(), maxAge(ctx, c.maxAge), creds)
		}
	}
	close(call.done)
	if call.err != nil && longLived {
		// A long-lived cache tries again next time (the server may be back).
		c.mu.Lock()
		if c.repos[key] == call {
			delete(c.repos, key)
		}
		c.mu.Unlock()
	}
	return call.repo, call.err
}

// forget drops a damaged clone from the Cache and from disk (under its
// lock: another process sharing the cache may be fetching into it), so
// that the next Open clones the remote again.
func (c *Cache) forget(key string, call *openCall) error {
	c.mu.Lock()
	mine := c.repos[key] == call
	if mine {
		delete(c.repos, key)
	}
	c.mu.Unlock()
	if !mine {
		return nil // another Open forgot it first, and clones it again
	}
	r := call.repo
	if r.holding.Swap(false) {
		c.holding.Add(-1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	unlock, err := lockFile(r.lock)
	if err != nil {
		return err
	}
	defer unlock()
	return os.RemoveAll(r.root)
}

func openLocal(loc Location, create bool) (*Repo, error) {
	if create {
		g, err := git.PlainOpen(loc.Path)
		if errors.Is(err, git.ErrRepositoryNotExists) {
			if entries, rerr := os.ReadDir(loc.Path); rerr == nil && len(entries) > 0 {
				return nil, fmt.Errorf("%s exists and is not a git repository", loc.Path)
			}
			g, err = git.PlainInit(loc.Path, true)
		}
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", loc.Path, err)
		}
		return newRepo(loc, g, loc.Path, ""), nil
	}
	g, err := git.PlainOpenWithOptions(loc.Path, &git.PlainOpenOptions{DetectDotGit: true})
	if errors.Is(err, git.ErrRepositoryNotExists) && IsBare(loc.Path) {
		// A bare repository (a mirror on a shared disk, a test's remote)
		// has no .git to detect: it is one.
		g, err = git.PlainOpen(loc.Path)
	}
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("%s: %w", loc.Path, ErrNotRepository)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", loc.Path, err)
	}
	root := loc.Path
	if wt, err := g.Worktree(); err == nil {
		root = wt.Filesystem.Root()
	}
	prefix, err := filepath.Rel(root, loc.Path)
	if err != nil || strings.HasPrefix(prefix, "..") {
		prefix = "."
	}
	return newRepo(loc, g, root, filepath.ToSlash(prefix)), nil
}

// IsBare reports whether dir is a bare git repository (no working tree;
// HEAD, objects and refs in dir itself).
func IsBare(dir string) bool {
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	g, err := git.PlainOpen(dir)
	if err != nil {
		return false
	}
	_, err = g.Worktree()
	return errors.Is(err, git.ErrIsBareRepository)
}

// ErrNotRepository is returned for a local source that is not inside a git
// repository.
var ErrNotRepository = errors.New("not a git repository")

// credsKey identifies the credentials an Open uses: its own, or the
// Cache's.
func (c *Cache) credsKey(own *Credentials) [32]byte {
	if own != nil {
		return credsKey(own.Auth)
	}
	c.creds.mu.Lock()
	defer c.creds.mu.Unlock()
	return credsKey(c.creds.auth)
}

// failuresOf returns the backoff of the clone key.
func (c *Cache) failuresOf(key string) *backoff.Failures {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing == nil {
		c.failing = map[string]*backoff.Failures{}
	}
	f, ok := c.failing[key]
	if !ok {
		f = &backoff.Failures{}
		c.failing[key] = f
	}
	return f
}

func (c *Cache) openRemote(ctx context.Context, loc Location, own *Credentials, fail *backoff.Failures) (*Repo, error) {
	id := loc.Key()
	if own != nil {
		id += "\x00" + own.Scope
	}
	sum := sha256.Sum256([]byte(id))
	name := hex.EncodeToString(sum[:8]) + "-" + sanitize(filepath.Base(loc.Key()))
	dir := filepath.Join(c.dir, name)
	// Clones are readable by their owner only: what a private
	// repository holds is as private in the cache.
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := lockFile(dir + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The clone's configuration names the remote without credentials:
	// they are given to each fetch and push, never written down.
	plain := withoutUserinfo(loc.URL)
	g, err := openClone(dir, c.objects)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if g, err = git.PlainInit(dir, true); err == nil {
			_, err = g.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{plain}})
		}
		if err == nil {
			g, err = openClone(dir, c.objects)
		}
	} else if err == nil {
		err = forgetCredentials(g, plain)
	}
	if err != nil {
		return nil, fmt.Errorf("opening clone of %s in %s: %w", loc, dir, redactErr(err))
	}
	r := newRepo(loc, g, dir, ".")
	r.remote = true
	r.objects = c.objects
	r.creds = c.creds
	if own != nil {
		// A resource's own Secret is for the repository it names it for.
		r.creds = &credentials{auth: own.Auth.Trusting(loc.URL)}
	}
	r.lock = dir + ".lock"
	r.egress = c.egress
	r.onFetch = c.onFetch
	r.observe = c.observe
	r.guard = c.guard
	r.stall = c.stall
	r.fail = fail
	removeTmpPacks(dir) // a process killed in the middle of a fetch
	if err := r.fetch(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// openClone opens a clone of the cache, its decoded objects cached in
// objects. Only this process touches it while it is open (other processes
// wait on its lock to fetch), so go-git may keep pack files open and trust
// its listing of them.
func openClone(dir string, objects cache.Object) (*git.Repository, error) {
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil, git.ErrRepositoryNotExists
	}
	st := filesystem.NewStorageWithOptions(indexFS{osfs.New(dir)}, objects,
		filesystem.Options{MaxOpenDescriptors: maxOpenPacks})
	return git.Open(st, nil)
}

// withoutUserinfo is a URL with its user and password removed.
func withoutUserinfo(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// forgetCredentials rewrites a clone's remote URL that holds credentials
// (as clones of earlier Sluice versions did) without them.
func forgetCredentials(g *git.Repository, plain string) error {
	cfg, err := g.Config()
	if err != nil {
		return err
	}
	rc, ok := cfg.Remotes["origin"]
	if !ok || len(rc.URLs) == 1 && rc.URLs[0] == plain {
		return nil
	}
	rc.URLs = []string{plain}
	return g.SetConfig(cfg)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}
