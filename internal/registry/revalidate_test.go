package registry

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"sluice.dev/sluice/internal/testenv"
)

// TestAStaleTagIsAnsweredAtOnceAndLookedUpBehind: a routine re-check of a
// stale tag (ContextWithRevalidate) answers with what is known and asks
// the registry in the background, once however many ask; a moved tag is
// reported with the moment the registry was asked, and a look-up since
// that moment uses the new answer without asking again; an unmoved tag
// is reported nowhere.
func TestAStaleTagIsAnsweredAtOnceAndLookedUpBehind(t *testing.T) {
	reg := testenv.NewRegistry(t)
	first := reg.Push(t, "team/app:dev")
	reg.Push(t, "team/app:v1")
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	changes := make(chan Change, 10)
	c := New(WithClock(clock), WithRevalidate(func(ch Change) { changes <- ch }))
	ctx := ContextWithRevalidate(ContextWithMaxAge(context.Background(), time.Minute))
	ref := reg.Host + "/team/app:dev"
	if d, err := c.Digest(ctx, ref); err != nil || d != first {
		t.Fatalf("first look-up: %s, %v", d, err)
	}
	if _, err := c.Tags(ctx, reg.Host+"/team/app"); err != nil {
		t.Fatal(err)
	}
	moved := reg.Push(t, "team/app:dev")
	advance(2 * time.Minute)
	before := reg.Requests.Load()
	for range 20 {
		if d, err := c.Digest(ctx, ref); err != nil || d != first {
			t.Fatalf("a stale re-check: %s, %v; want the known %s at once", d, err, first)
		}
	}
	var ch Change
	select {
	case ch = <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("the moved tag was not reported")
	}
	if ch.Repository != reg.Host+"/team/app" || ch.Tag != "dev" || !ch.At.Equal(clock()) {
		t.Errorf("reported %+v, want %s/team/app, dev, at %s", ch, reg.Host, clock())
	}
	if n := reg.Requests.Load() - before; n != 1 {
		t.Errorf("twenty stale re-checks asked the registry %d times, want once", n)
	}
	// What the report asks for is there already.
	before = reg.Requests.Load()
	if d, err := c.Digest(ContextWithNotBefore(ctx, ch.At), ref); err != nil || d != moved {
		t.Errorf("since the report: %s, %v; want %s", d, err, moved)
	}
	if n := reg.Requests.Load() - before; n != 0 {
		t.Errorf("a look-up since the report asked the registry %d times", n)
	}
	// The tag list: a new tag is a change of the repository.
	reg.Push(t, "team/app:v2")
	advance(2 * time.Minute)
	if tags, err := c.Tags(ctx, reg.Host+"/team/app"); err != nil || len(tags) != 2 {
		t.Fatalf("a stale tag list: %v, %v; want the two known", tags, err)
	}
	select {
	case ch = <-changes:
		if ch.Repository != reg.Host+"/team/app" || ch.Tag != "" {
			t.Errorf("a new tag reported as %+v", ch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new tag was not reported")
	}
	// Unmoved: looked up again, reported nowhere, and fresh after.
	advance(2 * time.Minute)
	before = reg.Requests.Load()
	if d, _ := c.Digest(ctx, ref); d != moved {
		t.Fatalf("re-check: %s", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for reg.Requests.Load() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case ch := <-changes:
		t.Errorf("an unmoved tag was reported: %+v", ch)
	case <-time.After(300 * time.Millisecond):
	}
	before = reg.Requests.Load()
	if d, _ := c.Digest(ctx, ref); d != moved || reg.Requests.Load() != before {
		t.Errorf("after its look-up the tag is not fresh: %s, %d requests", d, reg.Requests.Load()-before)
	}
	// Without ContextWithRevalidate a stale tag is looked up first.
	again := reg.Push(t, "team/app:dev")
	advance(2 * time.Minute)
	if d, _ := c.Digest(ContextWithMaxAge(context.Background(), time.Minute), ref); d != again {
		t.Errorf("a plain look-up of a stale tag: %s, want %s", d, again)
	}
}

// TestALookUpHeldByTheRateIsNotStaleWhenItLands: an answer is as old as
// the request that got it, not as the call that queued it behind the
// rate, and a caller finding it under way waits for it rather than asking
// again: a first pass longer than the interval looks each tag up once.
//
// The clock the answers age by moves 10 s with each request the registry
// receives, so that ages follow the order requests leave in, whatever the
// machine's speed.
func TestALookUpHeldByTheRateIsNotStaleWhenItLands(t *testing.T) {
	reg := testenv.NewRegistry(t)
	for i := range 5 {
		reg.Push(t, fmt.Sprintf("team/app:v%d", i))
	}
	base := time.Now()
	var received atomic.Int64
	release := make(chan struct{})
	var heads atomic.Int64
	arrived := make(chan struct{})
	reg.FailWith(func(r *http.Request) int {
		received.Add(1)
		if r.Method == http.MethodHead {
			if heads.Add(1) == 5 {
				close(arrived)
			}
			<-release // answered once every tag's request has arrived
		}
		return 0
	})
	defer reg.FailWith(nil)
	clock := func() time.Time { return base.Add(time.Duration(received.Load()) * 10 * time.Second) }
	// Two requests a second, one at a time: the five tags queue behind
	// the rate and the ping.
	c := New(WithLimiter(NewLimiter(2, nil)), WithTTL(25*time.Second), WithClock(clock))
	ctx := context.Background()
	before := reg.Requests.Load()
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if _, err := c.Digest(ctx, fmt.Sprintf("%s/team/app:v%d", reg.Host, i)); err != nil {
				t.Error(err)
			}
		})
	}
	<-arrived
	// Every look-up is under way, each begun more than the TTL ago by the
	// clock (60 s now): asked again, one is waited for, not asked again.
	// (A call asking again would send a sixth HEAD, held like the others;
	// a call the machine is slow to run finds the look-up done and fresh.)
	again := make(chan error, 1)
	go func() {
		_, err := c.Digest(ctx, reg.Host+"/team/app:v4")
		again <- err
	}()
	time.Sleep(100 * time.Millisecond) // time for the call to join (its asking is what fails)
	close(release)
	wg.Wait()
	if err := <-again; err != nil {
		t.Fatal(err)
	}
	if n := reg.Requests.Load() - before; n != 6 {
		t.Fatalf("five tags, one asked again while under way: %d requests, want 6 (a ping and five)", n)
	}
	reg.FailWith(nil) // the clock stays at 60 s
	// The requests left at 10, 20, ... 50 s by the clock; at 60 s the two
	// that left last are within the TTL (25 s), the three before are not
	// (as old as their calls, all five would be stale).
	before = reg.Requests.Load()
	for i := range 5 {
		wg.Go(func() {
			if _, err := c.Digest(ctx, fmt.Sprintf("%s/team/app:v%d", reg.Host, i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := reg.Requests.Load() - before; n != 3 {
		t.Errorf("just after the first pass, %d tags were looked up again, want the 3 that left over 25s before", n)
	}
}

// TestALookUpSomebodyWaitsForIsNotQueuedBehindTheBackground: thirty
// stale tags looked up behind their renders at 2 requests a second hold
// at most a few places in the rate's queue; a look-up somebody waits for
// (a tag not known yet) is served after those few, not after all thirty.
func TestALookUpSomebodyWaitsForIsNotQueuedBehindTheBackground(t *testing.T) {
	reg := testenv.NewRegistry(t)
	const n = 30
	for i := range n {
		reg.Push(t, fmt.Sprintf("team/app:v%d", i))
	}
	reg.Push(t, "team/app:wanted")
	var mu sync.Mutex
	var order []string
	reg.FailWith(func(r *http.Request) int {
		if r.Method == http.MethodHead {
			mu.Lock()
			order = append(order, r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:])
			mu.Unlock()
		}
		return 0
	})
	var cmu sync.Mutex
	now := time.Now()
	clock := func() time.Time { cmu.Lock(); defer cmu.Unlock(); return now }
	l := NewLimiter(2, nil)
	c := New(WithLimiter(l), WithClock(clock), WithRevalidate(func(Change) {}))
	ctx := ContextWithRevalidate(ContextWithMaxAge(context.Background(), time.Minute))
	// Known first, without the rate.
	hl := l.host(reg.Host)
	hl.rate.SetLimit(rate.Inf)
	for i := range n {
		if _, err := c.Digest(ctx, fmt.Sprintf("%s/team/app:v%d", reg.Host, i)); err != nil {
			t.Fatal(err)
		}
	}
	hl.rate.SetLimitAt(time.Now(), 2)
	hl.rate.SetBurstAt(time.Now(), 1)
	mu.Lock()
	order = nil
	mu.Unlock()
	cmu.Lock()
	now = now.Add(2 * time.Minute)
	cmu.Unlock()
	for i := range n {
		if _, err := c.Digest(ctx, fmt.Sprintf("%s/team/app:v%d", reg.Host, i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the background look-ups queue
	if _, err := c.Digest(ctx, reg.Host+"/team/app:wanted"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	at := slices.Index(order, "wanted")
	if at < 0 || at > backgroundSlots+2 {
		t.Errorf("the look-up waited for was request %d of %v, want one of the first %d", at+1, order, backgroundSlots+3)
	}
}
