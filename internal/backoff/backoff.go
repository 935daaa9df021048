// Package backoff shares a remote's failure like its success: while the
// backoff a failed request started runs, every caller is answered with
// that failure and the remote is asked nothing, however many resources
// read it. An outage then costs a few requests per repository or
// registry host, not one per resource per retry.
package backoff

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Backoff bounds: the first retry after 5 s, doubling, at most every 5
// minutes; each delay ±20 %, so that repositories failing together do not
// retry together. A server's Retry-After (429, 503) is obeyed when
// longer.
const (
	First = 5 * time.Second
	Max   = 5 * time.Minute
)

// RetryError is a remote's failure, shared by every caller until Next.
type RetryError struct {
	Err error
	// Failures are the failed requests in a row; Next is when the remote
	// is asked again.
	Failures int
	Next     time.Time
}

func (e *RetryError) Error() string {
	return fmt.Sprintf("%v (%s; next try at %s)", e.Err, plural(e.Failures, "failure in a row", "failures in a row"), e.Next.UTC().Format(time.TimeOnly))
}

func (e *RetryError) Unwrap() error { return e.Err }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Failures is the backoff of one remote (a clone's, a registry host's).
// Its zero value is ready.
type Failures struct {
	mu   sync.Mutex
	n    int
	err  error
	at   time.Time // when the last failure happened
	next time.Time
	// creds identifies the credentials the failure happened with: other
	// ones (a rotated Secret) are tried at once.
	creds [32]byte
}

// Key identifies credentials without keeping them.
func Key(parts ...string) [32]byte {
	h := sha256.New()
	for _, s := range parts {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Shared returns the failure to answer with instead of asking the remote,
// if its backoff still runs, the credentials are those it failed with, and
// nobody asked for what the remote holds since it failed (a webhook, a
// reconcile request: the server may be back).
func (f *Failures) Shared(now, notBefore time.Time, creds [32]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil || !now.Before(f.next) || notBefore.After(f.at) || creds != f.creds {
		return nil
	}
	return &RetryError{Err: f.err, Failures: f.n, Next: f.next}
}

// Record notes a request's outcome and returns err as the callers waiting
// on it see it; a failure of the caller's own (its context ended) is not
// the remote's, and leaves the backoff as it was. every, when set, is how
// often the remote is asked when healthy (a sync's interval): the backoff
// grows no longer than that, so that a failing remote costs no more than
// a healthy one and is seen back within one interval.
func (f *Failures) Record(ctx context.Context, err error, retryAfter, every time.Duration, creds [32]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		f.n, f.err = 0, nil
		return nil
	case ctx.Err() != nil:
		return err
	}
	f.n++
	d := First << min(f.n-1, 10)
	d = min(d, Max)
	if every > 0 {
		d = min(d, max(every, First))
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	d = max(d, retryAfter)
	f.err, f.at, f.next, f.creds = err, time.Now(), time.Now().Add(d), creds
	return &RetryError{Err: err, Failures: f.n, Next: f.next}
}

// retryAfterKey carries, in a request's context, where the transport
// notes a Retry-After the remote answered with.
type retryAfterKey struct{}

// RetryAfter is the longest Retry-After seen by the requests of a
// context WithRetryAfter made.
type RetryAfter struct {
	mu sync.Mutex
	d  time.Duration
}

// WithRetryAfter returns a context whose requests through a Transport
// note their Retry-After in the RetryAfter returned.
func WithRetryAfter(ctx context.Context) (context.Context, *RetryAfter) {
	ra := &RetryAfter{}
	return context.WithValue(ctx, retryAfterKey{}, ra), ra
}

// Get is the longest Retry-After noted.
func (ra *RetryAfter) Get() time.Duration {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.d
}

// Transport notes the Retry-After of 429 and 503 answers in the
// request's context's RetryAfter, if any.
type Transport struct{ Next http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	ra, _ := req.Context().Value(retryAfterKey{}).(*RetryAfter)
	if ra == nil {
		return resp, err
	}
	d := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	ra.mu.Lock()
	ra.d = max(ra.d, d)
	ra.mu.Unlock()
	return resp, err
}

// ParseRetryAfter reads seconds or an HTTP date, at most an hour (a
// server cannot silence a repository for longer).
func ParseRetryAfter(v string, now time.Time) time.Duration {
	var d time.Duration
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}
