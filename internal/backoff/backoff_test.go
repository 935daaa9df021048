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
			before := time.Now()
			err := f.Record(ctx, fail, tt.retryAfter, tt.every, Key())
			var re *RetryError
			if !errors.As(err, &re) || re.Failures != i+1 || !errors.Is(err, fail) {
				t.Fatalf("every %s, failure %d: %v", tt.every, i+1, err)
			}
			d := re.Next.Sub(before)
			lo, hi := want*8/10-time.Millisecond, want*12/10+time.Millisecond
			if tt.retryAfter > 0 {
				lo = tt.retryAfter - time.Millisecond
			}
			if d < lo || d > hi {
				t.Errorf("every %s, Retry-After %s, failure %d: next try in %s, want %s ±20%%", tt.every, tt.retryAfter, i+1, d, want)
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
