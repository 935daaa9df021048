package registry

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"sluice.dev/sluice/internal/backoff"
)

// Limiter keeps each registry host under a request rate, and holds every
// request to a host whose 429 said Retry-After, not only the one retried:
// a registry that says "slow down" is obeyed by the whole process. One
// Limiter may serve many Clients (each with its own credentials).
type Limiter struct {
	rps     float64
	observe func(host string, status int)
	onWait  func(host string, waited time.Duration)

	mu    sync.Mutex
	hosts map[string]*hostLimit
}

// NewLimiter limits each host to rps requests per second (0: no limit),
// calling observe (if set) with each request's host and status (0 for a
// failure to connect).
func NewLimiter(rps float64, observe func(host string, status int)) *Limiter {
	return &Limiter{rps: rps, observe: observe, hosts: map[string]*hostLimit{}}
}

// OnWait calls f with how long each request waited for its host's rate
// (a request that did not wait is not reported).
func (l *Limiter) OnWait(f func(host string, waited time.Duration)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onWait = f
}

// limiter is a Client's transport through its Limiter.
type limiter struct {
	*Limiter
	next http.RoundTripper
}

type hostLimit struct {
	rate    *rate.Limiter
	blocked time.Time // no request before this (a Retry-After)
	// background holds the look-ups nobody waits for (a stale tag looked
	// up behind a render) to a few at a time in the rate's queue, so that
	// one somebody waits for is not queued behind all of them.
	background chan struct{}
	// fail is the host's backoff: a host down or answering 5xx (once a
	// look-up's own retries are spent) is asked again when it ends,
	// whatever asks meanwhile.
	fail backoff.Failures
}

// backgroundSlots is how many look-ups nobody waits for may queue for a
// host's rate at once: enough to keep a registry answering in 300 ms busy
// at 20 requests a second.
const backgroundSlots = 8

// maxRetryAfter bounds how long a Retry-After is honoured.
const maxRetryAfter = 5 * time.Minute

func (l *Limiter) host(h string) *hostLimit {
	l.mu.Lock()
	defer l.mu.Unlock()
	hl, ok := l.hosts[h]
	if !ok {
		r := rate.Inf
		if l.rps > 0 {
			r = rate.Limit(l.rps)
		}
		hl = &hostLimit{rate: rate.NewLimiter(r, max(1, int(l.rps))), background: make(chan struct{}, backgroundSlots)}
		l.hosts[h] = hl
	}
	return hl
}

func (l *limiter) RoundTrip(req *http.Request) (*http.Response, error) {
	hl := l.host(req.URL.Host)
	if bg, _ := req.Context().Value(backgroundKey{}).(bool); bg && l.rps > 0 {
		select {
		case hl.background <- struct{}{}:
			defer func() { <-hl.background }()
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	l.mu.Lock()
	wait := time.Until(hl.blocked)
	l.mu.Unlock()
	if wait > 0 {
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if err := hl.rate.Wait(req.Context()); err != nil {
		return nil, err
	}
	if waited := time.Since(start); waited > time.Millisecond {
		l.mu.Lock()
		f := l.onWait
		l.mu.Unlock()
		if f != nil {
			f(req.URL.Host, waited)
		}
	}
	if s, ok := req.Context().Value(sentKey{}).(*sent); ok {
		s.mark()
	}
	resp, err := l.next.RoundTrip(req)
	if l.observe != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		l.observe(req.URL.Host, status)
	}
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		if d := retryAfter(resp.Header.Get("Retry-After")); d > 0 {
			l.mu.Lock()
			if until := time.Now().Add(min(d, maxRetryAfter)); until.After(hl.blocked) {
				hl.blocked = until
			}
			l.mu.Unlock()
		}
	}
	return resp, err
}

// anyone is the credentials of a host's backoff: a host down is down for
// every Client.
var anyone = backoff.Key()

// failures is host's backoff.
func (l *Limiter) failures(host string) *backoff.Failures { return &l.host(host).fail }

// blockedUntil is when a Retry-After lets requests to host go again.
func (l *Limiter) blockedUntil(host string) time.Time {
	hl := l.host(host)
	l.mu.Lock()
	defer l.mu.Unlock()
	return hl.blocked
}

type backgroundKey struct{}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
