package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/testenv"
)

func TestRegistryLimitsAreKeptAndRetryAfterHonoured(t *testing.T) {
	reg := testenv.NewRegistry(t)
	for i := 0; i < 10; i++ {
		reg.Push(t, fmt.Sprintf("team/app:v%d", i))
	}
	var seen sync.Map
	var statuses atomic.Int64
	l := NewLimiter(5, func(host string, status int) {
		seen.Store(host, true)
		if status == http.StatusTooManyRequests {
			statuses.Add(1)
		}
	})
	var waited atomic.Int64
	l.OnWait(func(host string, d time.Duration) {
		if host == reg.Host {
			waited.Add(int64(d))
		}
	})
	c := New(WithLimiter(l))
	// Ten look-ups at 5 per second, after a burst of 5, take a second at
	// least.
	start := time.Now()
	for i := 0; i < 10; i++ {
		if _, err := c.Digest(context.Background(), fmt.Sprintf("%s/team/app:v%d", reg.Host, i)); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 950*time.Millisecond {
		t.Errorf("10 look-ups at 5/s took %s", d)
	}
	if _, ok := seen.Load(reg.Host); !ok {
		t.Error("the observer saw no request")
	}
	// What the requests past the burst waited for the rate is said.
	if w := time.Duration(waited.Load()); w < 800*time.Millisecond {
		t.Errorf("the requests past the burst waited %s in all, by OnWait", w)
	}
	// A 429 with Retry-After: 1 holds the retry (and everything else to
	// that host) for a second; the look-up then succeeds.
	var once atomic.Bool
	reg.FailWith(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/manifests/") && once.CompareAndSwap(false, true) {
			return http.StatusTooManyRequests
		}
		return 0
	})
	c = New(WithLimiter(NewLimiter(0, func(host string, status int) {
		if status == http.StatusTooManyRequests {
			statuses.Add(1)
		}
	})))
	start = time.Now()
	if _, err := c.Digest(context.Background(), reg.Host+"/team/app:v1"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second || statuses.Load() != 1 {
		t.Errorf("after a 429 with Retry-After: 1 the retry came %s later (%d 429s seen)", d, statuses.Load())
	}
}

func TestTTLLooksTagsUpAgainOnceStale(t *testing.T) {
	reg := testenv.NewRegistry(t)
	first := reg.Push(t, "team/app:dev")
	now := time.Now()
	c := New(WithTTL(time.Minute), WithClock(func() time.Time { return now }))
	ctx := context.Background()
	if d, _ := c.Digest(ctx, reg.Host+"/team/app:dev"); d != first {
		t.Fatalf("digest %s", d)
	}
	moved := reg.Push(t, "team/app:dev")
	now = now.Add(59 * time.Second)
	if d, _ := c.Digest(ctx, reg.Host+"/team/app:dev"); d != first {
		t.Errorf("within the TTL the answer is remembered: %s", d)
	}
	now = now.Add(2 * time.Second)
	if d, _ := c.Digest(ctx, reg.Host+"/team/app:dev"); d != moved {
		t.Errorf("after the TTL the moved tag is seen: %s, want %s", d, moved)
	}
}

// A caller asking for what the registry says since a moment (a push
// notification's) looks the tag up again, however young the answer
// remembered; every caller asking since the same moment shares one look-up.
func TestNotBeforeLooksUpOnceForEveryCallerOfOneMoment(t *testing.T) {
	reg := testenv.NewRegistry(t)
	first := reg.Push(t, "team/app:dev")
	c := New(WithTTL(time.Hour))
	ctx := context.Background()
	ref := reg.Host + "/team/app:dev"
	if d, _ := c.Digest(ctx, ref); d != first {
		t.Fatalf("digest %s", d)
	}
	moved := reg.Push(t, "team/app:dev")
	before := reg.Requests.Load()
	since := ContextWithNotBefore(ctx, time.Now())
	for range 10 {
		if d, err := c.Digest(since, ref); err != nil || d != moved {
			t.Fatalf("asked since the push: %s, %v; want %s", d, err, moved)
		}
	}
	if n := reg.Requests.Load() - before; n != 1 {
		t.Errorf("ten callers of one moment made %d requests, want 1", n)
	}
}

// A registry host down (here answering 502) is asked again when its
// backoff ends, whatever asks meanwhile: once a look-up's own retries are
// spent, look-ups of any tag fail at once with its failure and when the
// next try is, and only a look-up asking for what the registry holds
// since a moment asks before.
func TestAFailingHostIsAskedOncePerBackoff(t *testing.T) {
	reg := testenv.NewRegistry(t)
	for i := range 5 {
		reg.Push(t, fmt.Sprintf("team/app:v%d", i))
	}
	var asked atomic.Int64
	c := New(WithLimiter(NewLimiter(0, func(host string, status int) {
		if host == reg.Host && status == http.StatusBadGateway {
			asked.Add(1)
		}
	})))
	reg.FailWith(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/manifests/") {
			return http.StatusBadGateway
		}
		return 0
	})
	ctx := context.Background()
	if _, err := c.Digest(ctx, reg.Host+"/team/app:v0"); err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("a look-up while the registry fails: %v", err)
	}
	// The look-up's own retries spent, the host backs off.
	first := asked.Load()
	for i := range 20 {
		_, err := c.Digest(ctx, fmt.Sprintf("%s/team/app:v%d", reg.Host, i%5))
		var re *backoff.RetryError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "502 Bad Gateway") || !strings.Contains(err.Error(), "next try at") {
			t.Fatalf("look-up %d while backing off: %v", i, err)
		}
	}
	if n := asked.Load() - first; n != 0 {
		t.Errorf("20 look-ups of 5 tags while the host backs off made %d requests, want none", n)
	}
	reg.FailWith(nil)
	if _, err := c.Digest(ContextWithNotBefore(ctx, time.Now()), reg.Host+"/team/app:v1"); err != nil {
		t.Fatalf("a look-up asking for now, once the registry is back: %v", err)
	}
	if _, err := c.Digest(ctx, reg.Host+"/team/app:v2"); err != nil {
		t.Fatalf("after a success: %v", err)
	}
}

// A registry that failed the handshake (its /v2/ ping answered 429, or
// 500) is asked again once it is back: the failure is not kept for the
// repository for as long as the Client lives (go-containerregistry's
// Puller keeps a repository's failed handshake for good).
func TestAFailedHandshakeIsNotKept(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusInternalServerError} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			reg := testenv.NewRegistry(t)
			reg.Push(t, "team/app:v1")
			c := New(WithLimiter(NewLimiter(0, nil)), WithBackoff(remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}))
			reg.FailWith(func(r *http.Request) int {
				if r.URL.Path == "/v2/" {
					return code
				}
				return 0
			})
			ctx := context.Background()
			if _, err := c.Digest(ctx, reg.Host+"/team/app:v1"); err == nil {
				t.Fatal("a look-up while the registry fails its handshake succeeded")
			}
			reg.FailWith(nil)
			before := reg.Requests.Load()
			if _, err := c.Digest(ContextWithNotBefore(ctx, time.Now().Add(time.Hour)), reg.Host+"/team/app:v1"); err != nil {
				t.Fatalf("a look-up once the registry is back (%d requests): %v", reg.Requests.Load()-before, err)
			}
		})
	}
}
