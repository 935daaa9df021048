package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"30", 30 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{"Sat, 05 Dec 2026 10:02:00 GMT", 2 * time.Minute},
		{"Sat, 05 Dec 2026 09:00:00 GMT", 0},
		{"86400", time.Hour}, // a server cannot silence a repository for a day
	} {
		if got := ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("Retry-After %q: %s, want %s", tt.in, got, tt.want)
		}
	}
}

// The delays double from 5 s (±20 %), never past 5 minutes, never past the
// caller's interval when it gives one, and never short of a Retry-After;
// a success ends the backoff.
func TestTheDelaysGrowToTheirBound(t *testing.T) {
	ctx := context.Background()
	fail := errors.New("503")
	for _, tt := range []struct {
		every, retryAfter time.Duration
		want              []time.Duration // each delay's middle
	}{
		{0, 0, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, Max, Max}},
		{10 * time.Second, 0, []time.Duration{5 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}},
		{time.Second, 0, []time.Duration{First, First}}, // an interval shorter than the first delay
		{10 * time.Second, time.Minute, []time.Duration{time.Minute, time.Minute}},
	} {
		var f Failures
		for i, want := range tt.want {
			// The delay is counted from a moment within the call: bound it
			// by the instants before and after, however slow the machine.
			before := time.Now()
			err := f.Record(ctx, fail, tt.retryAfter, tt.every, Key())
			after := time.Now()
			var re *RetryError
			if !errors.As(err, &re) || re.Failures != i+1 || !errors.Is(err, fail) {
				t.Fatalf("every %s, failure %d: %v", tt.every, i+1, err)
			}
			lo, hi := want*8/10, want*12/10
			if tt.retryAfter > 0 {
				lo = tt.retryAfter
			}
			if re.Next.Before(before.Add(lo)) || re.Next.After(after.Add(hi)) {
				t.Errorf("every %s, Retry-After %s, failure %d: next try in %s, want %s ±20%%", tt.every, tt.retryAfter, i+1, re.Next.Sub(before), want)
			}
			if f.Shared(time.Now(), time.Time{}, Key()) == nil {
				t.Errorf("failure %d is not shared", i+1)
			}
		}
		f.Record(ctx, nil, 0, tt.every, Key())
		if f.Shared(time.Now(), time.Time{}, Key()) != nil {
			t.Error("a success did not end the backoff")
		}
	}
}

// A failure of the caller's own (its context cancelled: a leader stepping
// down; or its deadline passed: a reconcile timed out) is not the
// remote's: it is returned as it is, starts no backoff, and does not grow
// one already running.
func TestACallersOwnEndStartsNoBackoff(t *testing.T) {
	fail := errors.New("503")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "timed out": expired} {
		var f Failures
		err := f.Record(ctx, ctx.Err(), 0, 0, Key())
		var re *RetryError
		if errors.As(err, &re) || !errors.Is(err, ctx.Err()) {
			t.Errorf("%s: Record returned %v, want the context's own error", name, err)
		}
		if err := f.Shared(time.Now(), time.Time{}, Key()); err != nil {
			t.Errorf("%s: a backoff started: the next caller is answered %v", name, err)
		}
		// A backoff already running is left as it was.
		f.Record(context.Background(), fail, 0, 0, Key())
		f.Record(ctx, ctx.Err(), 0, 0, Key())
		if err := f.Shared(time.Now(), time.Time{}, Key()); !errors.As(err, &re) || re.Failures != 1 || !errors.Is(err, fail) {
			t.Errorf("%s: the running backoff became %v, want the remote's one failure", name, err)
		}
	}
}
