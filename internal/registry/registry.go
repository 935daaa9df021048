// Package registry is how Sluice talks to OCI registries: credentials from
// the docker config keychain, plain HTTP for loopback and for the hosts the
// user names insecure, retries with backoff for transient errors, and
// look-ups shared by everything in one run.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Client reaches registries. It deduplicates look-ups: a tag is resolved
// and a repository's tags are listed once per Client, however many
// callers ask. The zero value is not usable; call New.
type Client struct {
	keychain authn.Keychain
	insecure map[string]bool
	backoff  remote.Backoff
	rt       http.RoundTripper
	ttl      time.Duration
	now      func() time.Time
	limit    *Limiter
	changed  func(Change)

	pullerOnce sync.Once
	puller     *remote.Puller
	pusherOnce sync.Once
	pusher     *remote.Pusher

	mu      sync.Mutex
	digests map[string]*call[string]
	tags    map[string]*call[[]string]
}

type call[T any] struct {
	done chan struct{}
	// at is when the answer was asked of the registry: when its last
	// request left, after any wait for the rate (so that a look-up queued
	// behind the rate for minutes is not stale when it lands).
	at  time.Time
	val T
	err error
	// refreshing: a look-up in the background replaces this answer.
	refreshing bool
	// refreshErr is why the last look-up in the background failed.
	refreshErr error
}

type staleKey struct{}

// StaleReport collects what the look-ups of a context answered from a
// stale answer that could not be made current: its look-up again failed,
// or waits behind the registry's Retry-After. The digest pinned may then
// be behind the tag, and the sync says why.
type StaleReport struct {
	mu    sync.Mutex
	notes map[string]string
}

// ContextWithStaleReport returns a context whose stale answers are noted
// in the StaleReport returned.
func ContextWithStaleReport(ctx context.Context) (context.Context, *StaleReport) {
	s := &StaleReport{notes: map[string]string{}}
	return context.WithValue(ctx, staleKey{}, s), s
}

// Notes are the stale answers, one line each, sorted.
func (s *StaleReport) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.notes))
	for _, n := range s.notes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// noteStale notes in ctx's report, if any, why the stale answer of key
// (asked at) is not current.
func (c *Client) noteStale(ctx context.Context, key string, at time.Time, refreshErr error) {
	s, _ := ctx.Value(staleKey{}).(*StaleReport)
	if s == nil {
		return
	}
	var why string
	host, _, _ := strings.Cut(key, "/") // as ask backs hosts off
	if refreshErr != nil {
		why = "looking it up again failed: " + refreshErr.Error()
	} else if until := c.limit.blockedUntil(host); until.After(c.now()) {
		why = fmt.Sprintf("looking it up again waits for the registry's Retry-After, until %s", until.UTC().Format(time.TimeOnly))
	}
	if why == "" {
		return
	}
	s.mu.Lock()
	s.notes[key] = fmt.Sprintf("%s last looked up at %s; %s", key, at.UTC().Format(time.TimeOnly), why)
	s.mu.Unlock()
}

// Change is a tag (or a repository's tag list) that a look-up in the
// background found moved.
type Change struct {
	// Repository is host/path; Tag is empty for a repository's tag list.
	Repository, Tag string
	// At is when the registry was asked: a look-up asking for answers
	// since At (ContextWithNotBefore) uses the new one.
	At time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithInsecure names hosts (host or host:port) reached over plain HTTP.
// Loopback hosts always are.
func WithInsecure(hosts ...string) Option {
	return func(c *Client) {
		for _, h := range hosts {
			c.insecure[h] = true
		}
	}
}

// WithKeychain sets where credentials come from. The default is the docker
// config keychain ($DOCKER_CONFIG, ~/.docker/config.json and its helpers).
func WithKeychain(k authn.Keychain) Option { return func(c *Client) { c.keychain = k } }

// WithBackoff sets the retry schedule for transient errors (connection
// failures, 408, 429, 5xx). The default is 4 tries, 200ms apart at first,
// tripling.
func WithBackoff(b remote.Backoff) Option { return func(c *Client) { c.backoff = b } }

// WithTransport sets the HTTP transport. The default is
// remote.DefaultTransport.
func WithTransport(rt http.RoundTripper) Option { return func(c *Client) { c.rt = rt } }

// WithClock sets the clock answers age by. The default is time.Now.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// WithTTL makes a long-lived Client (a controller's) look a tag up again
// once its answer is older than d: one look-up per repository:tag per d,
// shared by every caller. The default, 0, remembers answers for the
// Client's life (a run).
func WithTTL(d time.Duration) Option { return func(c *Client) { c.ttl = d } }

// WithRevalidate lets look-ups under ContextWithRevalidate answer at once
// from a stale answer while the registry is asked again in the
// background (one look-up per tag at a time); changed is called when
// that look-up finds the tag moved (or the repository's tags changed).
func WithRevalidate(changed func(Change)) Option { return func(c *Client) { c.changed = changed } }

type revalidateKey struct{}

// ContextWithRevalidate lets the look-ups under ctx answer from a stale
// answer at once and look again in the background, on a Client made
// WithRevalidate: a routine re-check (a sync's interval) does not wait
// on the registry's rate; what moved is reported to the Client's
// changed. A tag never looked up, or one asked since a moment
// (ContextWithNotBefore), is still looked up before the answer.
func ContextWithRevalidate(ctx context.Context) context.Context {
	return context.WithValue(ctx, revalidateKey{}, true)
}

type maxAgeKey struct{}

// ContextWithMaxAge asks the look-ups under ctx for answers at most d old
// (a sync's interval), whatever the Client's TTL.
func ContextWithMaxAge(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxAgeKey{}, d)
}

type notBeforeKey struct{}

// ContextWithNotBefore asks the look-ups under ctx for answers the
// registry gave at t or later: a push notification or a person asked at t.
func ContextWithNotBefore(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, notBeforeKey{}, t)
}

// WithLimiter sends every request through l (see Limiter), which may be
// shared with other Clients. The default is a Limiter of no rate limit
// that still obeys Retry-After.
func WithLimiter(l *Limiter) Option { return func(c *Client) { c.limit = l } }

// New returns a Client.
func New(opts ...Option) *Client {
	c := &Client{
		keychain: authn.DefaultKeychain,
		insecure: map[string]bool{},
		backoff:  remote.Backoff{Duration: 200 * time.Millisecond, Factor: 3.0, Jitter: 0.1, Steps: 4},
		rt:       remote.DefaultTransport,
		now:      time.Now,
		digests:  map[string]*call[string]{},
		tags:     map[string]*call[[]string]{},
	}
	for _, o := range opts {
		o(c)
	}
	if c.limit == nil {
		c.limit = NewLimiter(0, nil)
	}
	c.rt = newPingCache(&limiter{Limiter: c.limit, next: c.rt})
	return c
}

// isLoopback reports whether host:port names this machine.
func isLoopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// nameOptions are the name options for a reference's host.
func (c *Client) nameOptions(s string) []name.Option {
	host, _, _ := strings.Cut(s, "/")
	if c.insecure[host] || isLoopback(host) {
		return []name.Option{name.Insecure}
	}
	return nil
}

// ParseReference parses an image reference, reaching its host over plain
// HTTP when it is loopback or named insecure.
func (c *Client) ParseReference(s string) (name.Reference, error) {
	return name.ParseReference(s, c.nameOptions(s)...)
}

// ParseRepository parses a repository name like ParseReference.
func (c *Client) ParseRepository(s string) (name.Repository, error) {
	return name.NewRepository(s, c.nameOptions(s)...)
}

// Options are the remote options for a call: context, credentials,
// transport and retries, and a shared puller so that the registry's auth
// handshake happens once per repository, not once per call.
func (c *Client) Options(ctx context.Context) []remote.Option {
	c.pullerOnce.Do(func() {
		p, err := remote.NewPuller(c.baseOptions()...)
		if err == nil {
			c.puller = p
		}
	})
	opts := append(c.baseOptions(), remote.WithContext(ctx))
	if c.puller != nil {
		opts = append(opts, remote.Reuse(c.puller))
	}
	return opts
}

// PushOptions are the remote options for writes, with a shared pusher:
// one auth handshake per repository, and blobs already uploaded (or
// mounted) in this run are not uploaded again.
func (c *Client) PushOptions(ctx context.Context) []remote.Option {
	c.pusherOnce.Do(func() {
		p, err := remote.NewPusher(c.baseOptions()...)
		if err == nil {
			c.pusher = p
		}
	})
	opts := append(c.baseOptions(), remote.WithContext(ctx))
	if c.pusher != nil {
		opts = append(opts, remote.Reuse(c.pusher))
	}
	return opts
}

func (c *Client) baseOptions() []remote.Option {
	return []remote.Option{
		remote.WithAuthFromKeychain(c.keychain),
		remote.WithTransport(c.rt),
		remote.WithRetryBackoff(c.backoff),
		remote.WithRetryStatusCodes(http.StatusRequestTimeout, http.StatusTooManyRequests,
			http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout),
	}
}

// ErrNotFound is returned when a tag or repository does not exist.
var ErrNotFound = errors.New("not found")

// Digest resolves a tag (repo:tag) to the digest of its manifest or index.
func (c *Client) Digest(ctx context.Context, ref string) (string, error) {
	return memo(ctx, c, c.digests, ref, func(ctx context.Context) (string, error) {
		r, err := c.ParseReference(ref)
		if err != nil {
			return "", err
		}
		desc, err := remote.Head(r, c.Options(ctx)...)
		if err != nil {
			// Some registries refuse HEAD; GET is the fallback.
			var terr *transport.Error
			if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
				return "", fmt.Errorf("%s: %w", ref, ErrNotFound)
			}
			d, gerr := remote.Get(r, c.Options(ctx)...)
			if gerr != nil {
				return "", classify(ref, gerr)
			}
			return d.Digest.String(), nil
		}
		return desc.Digest.String(), nil
	})
}

// Tags lists a repository's tags.
func (c *Client) Tags(ctx context.Context, repo string) ([]string, error) {
	return memo(ctx, c, c.tags, repo, func(ctx context.Context) ([]string, error) {
		r, err := c.ParseRepository(repo)
		if err != nil {
			return nil, err
		}
		tags, err := remote.List(r, c.Options(ctx)...)
		if err != nil {
			return nil, classify(repo, err)
		}
		return tags, nil
	})
}

// Forget drops what the Client remembers of a reference, after a write
// that moved it.
func (c *Client) Forget(ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.digests, ref)
	if r, err := c.ParseReference(ref); err == nil {
		delete(c.tags, r.Context().String())
	}
}

// Image fetches an image or chart manifest by reference.
func (c *Client) Image(ctx context.Context, ref name.Reference) (v1.Image, error) {
	img, err := remote.Image(ref, c.Options(ctx)...)
	if err != nil {
		return nil, classify(ref.String(), err)
	}
	return img, nil
}

func classify(ref string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		if terr.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s: %w", ref, ErrNotFound)
		}
		for _, d := range terr.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
				return fmt.Errorf("%s: %w", ref, ErrNotFound)
			}
		}
	}
	return fmt.Errorf("%s: %w", ref, err)
}

func memo[T any](ctx context.Context, c *Client, m map[string]*call[T], key string, f func(context.Context) (T, error)) (T, error) {
	ttl := c.ttl
	if d, ok := ctx.Value(maxAgeKey{}).(time.Duration); ok && d > 0 {
		ttl = d
	}
	c.mu.Lock()
	cl, ok := m[key]
	if nb, _ := ctx.Value(notBeforeKey{}).(time.Time); ok && cl.at.Before(nb) {
		ok = false // asked for something newer
	}
	// A look-up under way is waited for, however long the rate holds it.
	if ok && ttl > 0 && isDone(cl.done) && c.now().Sub(cl.at) > ttl {
		if revalidate, _ := ctx.Value(revalidateKey{}).(bool); revalidate && c.changed != nil && cl.err == nil {
			// Stale, answered as it stands; looked up again behind it.
			refreshErr := cl.refreshErr
			if !cl.refreshing {
				cl.refreshing = true
				go refresh(context.WithoutCancel(ctx), c, m, key, cl, f)
			}
			at, val := cl.at, cl.val
			c.mu.Unlock()
			c.noteStale(ctx, key, at, refreshErr)
			return val, nil
		}
		ok = false // stale: ask again
	}
	if !ok {
		cl = &call[T]{done: make(chan struct{}), at: c.now()}
		m[key] = cl
	}
	c.mu.Unlock()
	if !ok {
		var at time.Time
		cl.val, cl.err, at = ask(ctx, c, key, f)
		c.mu.Lock()
		cl.at = at
		c.mu.Unlock()
		close(cl.done)
		if cl.err != nil && !errors.Is(cl.err, ErrNotFound) {
			// A failure is not remembered: the next caller tries again.
			c.mu.Lock()
			if m[key] == cl {
				delete(m, key)
			}
			c.mu.Unlock()
		}
		return cl.val, cl.err
	}
	<-cl.done
	return cl.val, cl.err
}

// refreshTimeout bounds a look-up in the background, its wait for the
// rate included.
const refreshTimeout = 10 * time.Minute

// refresh looks key up again in the background and replaces old with
// the answer, telling the Client's changed if it differs. A failure
// keeps the old answer (the next stale use tries again).
func refresh[T any](ctx context.Context, c *Client, m map[string]*call[T], key string, old *call[T], f func(context.Context) (T, error)) {
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, backgroundKey{}, true), refreshTimeout)
	defer cancel()
	val, err, at := ask(ctx, c, key, f)
	c.mu.Lock()
	old.refreshing = false
	if err != nil && !errors.Is(err, ErrNotFound) {
		old.refreshErr = err
	}
	if err != nil && !errors.Is(err, ErrNotFound) || m[key] != old {
		// Failed, or replaced meanwhile (a look-up asked since a moment).
		c.mu.Unlock()
		return
	}
	nc := &call[T]{done: make(chan struct{}), at: at, val: val, err: err}
	close(nc.done)
	m[key] = nc
	c.mu.Unlock()
	if err != nil || !reflect.DeepEqual(val, old.val) {
		ch := Change{Repository: key, At: at}
		if _, list := any(val).([]string); !list {
			// A digest's key is repo:tag.
			if t, perr := name.NewTag(key, c.nameOptions(key)...); perr == nil {
				ch.Repository, ch.Tag = t.Context().String(), t.TagStr()
			}
		}
		c.changed(ch)
	}
}

type sentKey struct{}

// sent records when a look-up's last request left.
type sent struct {
	mu  sync.Mutex
	at  time.Time
	now func() time.Time
}

func (s *sent) mark() {
	s.mu.Lock()
	s.at = s.now()
	s.mu.Unlock()
}

// ask runs f, returning when the registry was asked: when f's last
// request left (or when f began, if it sent none).
//
// The look-up's host backs off as a whole: while a look-up that failed
// for the host's sake (5xx, no connection, once its own retries were
// spent) holds its backoff, look-ups of any of its tags fail at once with
// that failure, unless asked for what the registry holds since it.
func ask[T any](ctx context.Context, c *Client, key string, f func(context.Context) (T, error)) (T, error, time.Time) {
	host, _, _ := strings.Cut(key, "/")
	fail := c.limit.failures(host)
	nb, _ := ctx.Value(notBeforeKey{}).(time.Time)
	if err := fail.Shared(time.Now(), nb, anyone); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", key, err), c.now()
	}
	s := &sent{at: c.now(), now: c.now}
	val, err := f(context.WithValue(ctx, sentKey{}, s))
	switch {
	case err == nil || errors.Is(err, ErrNotFound):
		fail.Record(ctx, nil, 0, 0, anyone)
	case hostFailed(err):
		every, _ := ctx.Value(maxAgeKey{}).(time.Duration)
		err = fail.Record(ctx, err, 0, every, anyone) // says when the next try is
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return val, err, s.at
}

// hostFailed tells a failure of the registry host's (a 5xx, no
// connection) from one of the look-up's (a missing tag, a refusal).
func hostFailed(err error) bool {
	var terr *transport.Error
	if errors.As(err, &terr) {
		return terr.StatusCode >= 500
	}
	var nerr net.Error // a *net.OpError (refused, reset) is one
	return errors.As(err, &nerr)
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Referrers lists the manifests that name repo@digest as their subject
// and are of artifactType: from the registry's referrers API, or the
// referrers tag (sha256-<hex>) where it has none. None is no error.
//
// Some registries' referrers API names an artifact's type by its config's
// media type (go-containerregistry's own registry does, others did before
// OCI 1.1 settled): a referrer reported as OCI's empty config or with no
// type is read, and its manifest's own artifactType decides.
func (c *Client) Referrers(ctx context.Context, repo, digest, artifactType string) ([]v1.Descriptor, error) {
	d, err := name.NewDigest(repo+"@"+digest, c.nameOptions(repo)...)
	if err != nil {
		return nil, err
	}
	idx, err := remote.Referrers(d, c.Options(ctx)...)
	if err != nil {
		if errors.Is(classify(d.String(), err), ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing what refers to %s: %w", d, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("listing what refers to %s: %w", d, err)
	}
	var out []v1.Descriptor
	read := 0
	for _, desc := range m.Manifests {
		switch desc.ArtifactType {
		case artifactType:
			out = append(out, desc)
		case "", emptyConfig:
			if read++; read > maxAmbiguousReferrers {
				continue
			}
			own, err := c.artifactType(ctx, d.Context().Digest(desc.Digest.String()))
			if err != nil {
				return nil, fmt.Errorf("reading %s, which refers to %s: %w", desc.Digest, d, err)
			}
			if own == artifactType {
				desc.ArtifactType = own
				out = append(out, desc)
			}
		}
	}
	return out, nil
}

// emptyConfig is OCI's empty config, which artifacts carry.
const emptyConfig = "application/vnd.oci.empty.v1+json"

// maxAmbiguousReferrers bounds the referrers read for their own type.
const maxAmbiguousReferrers = 64

// artifactType reads a manifest's own artifact type: its artifactType,
// else its config's media type (as OCI 1.1 defines it).
func (c *Client) artifactType(ctx context.Context, ref name.Digest) (string, error) {
	desc, err := remote.Get(ref, c.Options(ctx)...)
	if err != nil {
		return "", classify(ref.String(), err)
	}
	var m struct {
		ArtifactType string `json:"artifactType"`
		Config       struct {
			MediaType string `json:"mediaType"`
		} `json:"config"`
	}
	if err := json.Unmarshal(desc.Manifest, &m); err != nil {
		return "", err
	}
	if m.ArtifactType != "" {
		return m.ArtifactType, nil
	}
	return m.Config.MediaType, nil
}
