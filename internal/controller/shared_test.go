package controller

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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
	seen := map[string][]time.Time{}
	count := func(kind string) func(r *http.Request) int {
		return func(r *http.Request) int {
			if kind == "registry" || fromController(r) {
				mu.Lock()
				k := kind + " " + r.Method + " " + r.URL.Path
				seen[k] = append(seen[k], time.Now())
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
	// Five intervals: each repository and tag is asked about once per
	// interval, whoever asks: about five times, and never twice within
	// one interval (each of five syncs asking on its own would be 25, some
	// a moment apart).
	mu.Lock()
	clear(seen)
	mu.Unlock()
	const rounds = 5
	time.Sleep(rounds * interval)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"registry HEAD /v2/team/app/manifests/v1", "git GET /app.git/info/refs", "git GET /deploy.git/info/refs"}
	var got []string
	for k, v := range seen {
		got = append(got, fmt.Sprintf("%s: %d", k, len(v)))
	}
	for _, k := range want {
		at := seen[k]
		// At least one interval in two, with reconciles late on a loaded
		// machine: polling goes on.
		if n := len(at); n < rounds-2 || n > rounds+1 {
			t.Errorf("%s: %d requests in %d intervals of 5 syncs, want %d to %d (all: %s)", k, n, rounds, rounds-2, rounds+1, strings.Join(got, ", "))
		}
		for i := 1; i < len(at); i++ {
			// The interval less the scheduling of the reconcile that asks.
			if gap := at[i].Sub(at[i-1]); gap < interval*8/10 {
				t.Errorf("%s: asked again %s after the last time, within one interval (%s)", k, gap.Round(time.Millisecond), interval)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("requests in %d intervals: %s", rounds, strings.Join(got, ", "))
	}
}

// A registry slower than a sync's interval holds nothing up: an
// interval's re-check renders a new source commit with the digest known
// while the tag is looked up behind it, and the tag found moved then
// pins in a reconcile of its own, as does every sync following it, due
// or not (api's interval is an hour).
func TestASlowRegistryDoesNotHoldTheRendersUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(strings.Replace(webSync, "interval: 1h", "interval: 2s", 1))
	e.apply(strings.NewReplacer("web", "api").Replace(webSync))
	ms := e.ready("web", metav1.ConditionTrue, 30*time.Second)
	e.ready("api", metav1.ConditionTrue, 30*time.Second)
	known := ms.Status.Images[0].Digest
	moved := e.reg.Push(t, "team/app:v1")
	// From now on the registry answers a manifest look-up only when let.
	release := make(chan struct{})
	var held atomic.Int64
	e.reg.FailWith(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/manifests/") {
			held.Add(1)
			select {
			case <-release:
			case <-time.After(2 * time.Minute):
			}
		}
		return 0
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: '1'}\n"}).Commit("cm")
	e.app.Push("main")
	e.eventually(20*time.Second, func() string {
		if e.dst("show", "env/dev:apps/web/configmap-web.yaml") == "" {
			return fmt.Sprintf("the new source commit is not rendered while the tag's look-up waits (%d held)", held.Load())
		}
		return ""
	})
	if got := e.dst("show", "env/dev:apps/web/deployment-web.yaml"); !strings.Contains(got, known) {
		t.Fatalf("rendered with the registry answering nothing, the image is not the known digest %s:\n%s", known, got)
	}
	if n := held.Load(); n != 1 {
		t.Errorf("%d look-ups of the one tag are waiting, want 1", n)
	}
	close(release)
	for _, name := range []string{"web", "api"} {
		e.eventually(30*time.Second, func() string {
			ms := e.sync(name)
			if len(ms.Status.Images) != 1 || ms.Status.Images[0].Digest != moved ||
				!strings.Contains(e.dst("show", "env/dev:apps/"+name+"/deployment-"+name+".yaml"), moved) {
				return fmt.Sprintf("%s: the moved tag is not pinned: %+v", name, ms.Status.Images)
			}
			return ""
		})
	}
}
