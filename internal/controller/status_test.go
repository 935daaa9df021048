package controller

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
)

func TestRequestedAtReadsWhatPeopleAndWebhooksWrite(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		value, handled string
		want           time.Time
		asked          bool
	}{
		{"", "", time.Time{}, false},
		{"1796291940", "", time.Unix(1796291940, 0).Add(time.Second - 1), true},               // date +%s: the end of that second
		{"2026-12-03T09:59:00Z", "", time.Date(2026, 12, 3, 9, 59, 0, 1e9-1, time.UTC), true}, // whole seconds too
		{"1796292000", "", now, true}, // this second: now
		{"2026-12-03T09:59:00.5Z", "", time.Date(2026, 12, 3, 9, 59, 0, 5e8, time.UTC), true}, // a webhook's
		{"2026-12-03T11:00:00Z", "", now, true},                                               // a clock ahead: now
		{"whenever", "", now, true},                                                           // no time at all: now
		{"1796292000", "1796292000", time.Time{}, false},                                      // handled already
	} {
		obj := &metav1.ObjectMeta{}
		if c.value != "" {
			obj.Annotations = map[string]string{v1alpha1.ReconcileRequestAnnotation: c.value}
		}
		got, asked := requestedAt(obj, &v1alpha1.ReconcileStatus{LastHandledReconcileAt: c.handled}, now)
		if asked != c.asked || !got.Equal(c.want) {
			t.Errorf("requestedAt(%q, handled %q) = %v, %v; want %v, %v", c.value, c.handled, got, asked, c.want, c.asked)
		}
	}
}

func TestBackoffDoublesUpToTheInterval(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 5: 80 * time.Second, 9: 5 * time.Minute} {
		if got := retryDelay(n, 5*time.Minute); got != want {
			t.Errorf("retryDelay(%d) = %s, want %s", n, got, want)
		}
	}
	if got := retryDelay(4, 10*time.Second); got != 10*time.Second {
		t.Errorf("backoff past a short interval = %s", got)
	}
}

func TestAttemptsKeepARequestUntilItSucceeds(t *testing.T) {
	a := newAttempts()
	k := types.NamespacedName{Namespace: "n", Name: "s"}
	at := time.Unix(100, 0)
	if got := a.since(k, at, true); !got.Equal(at) {
		t.Fatalf("a new request: %v", got)
	}
	if a.record(k, true) != 1 || a.record(k, true) != 2 {
		t.Fatal("failures in a row are not counted")
	}
	if got := a.since(k, time.Time{}, false); !got.Equal(at) {
		t.Errorf("a retry forgot the request: %v", got)
	}
	if a.record(k, false) != 0 || !a.since(k, time.Time{}, false).IsZero() {
		t.Error("a success did not clear the request and the failures")
	}
}

// Look-ups queuing behind --registry-rps are said in the log, once per
// host a quarter of an hour, when they waited more than half of the last
// minute.
func TestLookUpsQueuingBehindTheRegistryRateAreSaid(t *testing.T) {
	var b strings.Builder
	w := newRateWarning(20, slog.New(slog.NewTextHandler(&b, nil)))
	for range 25 {
		w.wait("registry.example", time.Second)
	}
	w.wait("other.example", time.Second)
	if n := strings.Count(b.String(), "queuing behind --registry-rps"); n != 0 {
		t.Fatalf("warned after 25 s of waiting: %s", b.String())
	}
	for range 10 {
		w.wait("registry.example", time.Second)
	}
	if n := strings.Count(b.String(), "queuing behind --registry-rps"); n != 1 || !strings.Contains(b.String(), "host=registry.example") || strings.Contains(b.String(), "other.example") {
		t.Errorf("want one warning for registry.example:\n%s", b.String())
	}
}
