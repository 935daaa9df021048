package controller

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cost grows with repositories and tags, not with syncs: five syncs of one
// source repository following one tag cost, per interval, one ref
// advertisement per repository (source and destination) and one look-up of
// the tag, and nothing is rendered.
func TestChecksAreSharedBySyncsPerInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	seen := map[string]int{}
	count := func(kind string) func(r *http.Request) int {
		return func(r *http.Request) int {
			if kind == "registry" || fromController(r) {
				mu.Lock()
				seen[kind+" "+r.Method+" "+r.URL.Path]++
				mu.Unlock()
			}
			return 0
		}
	}
	e.reg.FailWith(count("registry"))
	e.git.FailWith(count("git"))
	e.start()
	const interval = 3 * time.Second
	for i := range 5 {
		e.apply(fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web-%d}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/dev, path: apps/web-%d}
  interval: %s
`, i, i, interval))
	}
	for i := range 5 {
		e.ready(fmt.Sprintf("web-%d", i), metav1.ConditionTrue, 30*time.Second)
	}
	// Three intervals: each repository and tag is asked about once per
	// interval, whoever asks, so three times give or take the rounds cut
	// at either end (a generous bound: one each per sync would be 15).
	mu.Lock()
	clear(seen)
	mu.Unlock()
	const rounds = 3
	time.Sleep(rounds * interval)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"registry HEAD /v2/team/app/manifests/v1", "git GET /app.git/info/refs", "git GET /deploy.git/info/refs"}
	var got []string
	for k, v := range seen {
		got = append(got, fmt.Sprintf("%s: %d", k, v))
	}
	for _, k := range want {
		if n := seen[k]; n < 1 || n > rounds+1 {
			t.Errorf("%s: %d requests in %d intervals of 5 syncs, want 1 to %d (all: %s)", k, n, rounds, rounds+1, strings.Join(got, ", "))
		}
	}
	if len(seen) != len(want) {
		t.Errorf("requests in %d intervals: %s", rounds, strings.Join(got, ", "))
	}
}
