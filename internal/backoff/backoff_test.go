package backoff

import (
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
