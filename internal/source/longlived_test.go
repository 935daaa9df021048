package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/testenv"
)

// A controller's Cache lives for days: each repository is asked for its
// refs at most once per maximum age (one request when nothing moved),
// fetched when something did, fetched at once for a caller asking for
// what the remote holds since a moment, and a rotated Secret is used on
// the same clone.
func TestLongLivedCacheFetchesByAgeAndNotBefore(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("bot", "two"))
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, strings.Replace(url, "http://", "http://bot:two@", 1))
	w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")

	var mu sync.Mutex
	ops := map[string]int{}
	cache := NewCache(t.TempDir(), WithObserver(func(op string) { mu.Lock(); ops[op]++; mu.Unlock() }))
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range ops {
			out[k] = v
		}
		clear(ops)
		return out
	}
	loc := mustLoc(t, url)
	creds := func(pw string) OpenOptions {
		return OpenOptions{Credentials: &Credentials{Auth: Auth{Username: "bot", Password: pw}, Scope: "ns/git"}}
	}
	hour := ContextWithMaxAge(ctx, time.Hour)
	if _, err := cache.Open(hour, loc, creds("one")); err == nil {
		t.Fatal("a wrong password opened the repository")
	}
	// The failure is not remembered: the right Secret works at once.
	repo, err := cache.Open(hour, loc, creds("two"))
	if err != nil {
		t.Fatal(err)
	}
	if got := count(); got["ls-remote"] != 2 || got["fetch"] != 1 {
		t.Errorf("first opens: %v, want 2 ls-remote (one refused) and 1 fetch", got)
	}
	for range 20 {
		if _, err := cache.Open(hour, loc, creds("two")); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(); len(got) != 0 {
		t.Errorf("opens within the age asked the server: %v", got)
	}
	// Past the age, with nothing new: one ref advertisement, no fetch.
	if _, err := cache.Open(ContextWithMaxAge(ctx, time.Nanosecond), loc, creds("two")); err != nil {
		t.Fatal(err)
	}
	if got := count(); got["ls-remote"] != 1 || got["fetch"] != 0 {
		t.Errorf("unchanged past its age: %v, want one ls-remote only", got)
	}
	// A push, then callers asking for what the remote holds since now:
	// one fetch for all of them, and they see the new commit.
	second := w.Write(map[string]string{"a": "2\n"}).Commit("two")
	w.Push("main")
	now := ContextWithNotBefore(hour, time.Now())
	for range 5 {
		r, err := cache.Open(now, loc, creds("two"))
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := r.Resolve("main"); c.Hash.String() != second {
			t.Fatalf("after a push asked for since: main = %s, want %s", c.Hash, second)
		}
	}
	if got := count(); got["ls-remote"] != 1 || got["fetch"] != 1 {
		t.Errorf("five callers asking since one moment: %v, want one ls-remote and one fetch", got)
	}
	// A rotated Secret (same scope) is used from then on, on the same
	// clone; the old one no longer works.
	r, err := cache.Open(ContextWithMaxAge(ctx, time.Nanosecond), loc, creds("stale"))
	if err == nil {
		t.Fatal("a rotated-away password still fetched")
	}
	if r != nil && r != repo {
		t.Error("another clone for the same scope")
	}
	if r, err := cache.Open(ContextWithMaxAge(ctx, time.Nanosecond), loc, creds("two")); err != nil || r != repo {
		t.Fatalf("back to the right password: %v (same clone: %v)", err, r == repo)
	}
}

// A remote's failure is shared like its success: while it backs off, every
// Open answers with the failure and asks nothing; a Retry-After longer
// than the backoff is obeyed; a caller asking for what the remote holds
// since the failure (a webhook, a reconcile request) or bringing other
// credentials (a rotated Secret) asks at once; a success ends it.
func TestARemoteFailureIsSharedUntilItsBackoffEnds(t *testing.T) {
	ctx := context.Background()
	srv, url := servedApp(t)
	var requests askCounter
	cache := NewCache(t.TempDir(), WithObserver(requests.observe))
	asked := requests.asked
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond) // each Open wants a fresh look
	if _, err := cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	asked()

	srv.FailWith(func(*http.Request) int { return http.StatusTooManyRequests })
	srv.RetryAfter(120)
	start := time.Now()
	_, err := cache.Open(every, loc, OpenOptions{})
	var re *backoff.RetryError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "429") || re.Failures != 1 {
		t.Fatalf("the first failure: %v", err)
	}
	if d := re.Next.Sub(start); d < 119*time.Second || d > 125*time.Second {
		t.Errorf("next try in %s, want the server's Retry-After, 120s", d)
	}
	for range 50 {
		if _, err := cache.Open(every, loc, OpenOptions{}); !errors.As(err, &re) || re.Failures != 1 {
			t.Fatalf("an Open while backing off: %v", err)
		}
	}
	if n := asked(); n != 1 {
		t.Errorf("51 Opens while backing off asked the remote %d times, want 1", n)
	}

	// Other credentials are tried at once (and fail the same here).
	other := OpenOptions{Credentials: &Credentials{Auth: Auth{Username: "bot", Password: "new"}}}
	if _, err := cache.Open(every, loc, other); err == nil {
		t.Fatal("the server is still failing")
	}
	if n := asked(); n != 1 {
		t.Errorf("an Open with other credentials asked %d times, want 1", n)
	}

	// A controller starting during the outage: its first Opens too.
	fresh := NewCache(t.TempDir(), WithObserver(requests.observe))
	for range 5 {
		if _, err := fresh.Open(every, loc, OpenOptions{}); !errors.As(err, &re) {
			t.Fatalf("a first Open while the server fails: %v", err)
		}
	}
	if n := asked(); n != 1 {
		t.Errorf("5 first Opens asked %d times, want 1", n)
	}

	// Back up: an Open asking for what the remote holds since now asks,
	// and the failure is over for everyone.
	srv.FailWith(nil)
	if _, err := cache.Open(ContextWithNotBefore(every, time.Now()), loc, OpenOptions{}); err != nil {
		t.Fatalf("asked since the failure: %v", err)
	}
	if _, err := cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatalf("after the success: %v", err)
	}
	if n := asked(); n != 2 {
		t.Errorf("two Opens once back asked %d times, want 2", n)
	}
}

// A controller's clone damaged (its packs lost, found on a restart, or
// the whole clone deleted while it runs) is noticed (an object a tree
// names cannot be read, or its directory is gone) and cloned again by the
// next Open: nothing wrong is read, and the repository reads as it is.
func TestADamagedCloneIsClonedAgain(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"deploy/a.yaml": "a: 1\n"}).Commit("one")
	w.Push("main")
	dir := t.TempDir()
	cache := NewCache(dir)
	loc := mustLoc(t, url)
	hour := ContextWithMaxAge(ctx, time.Hour)
	// read opens the repository as of now and reads deploy/a.yaml.
	read := func(step string) error {
		r, err := cache.Open(ContextWithNotBefore(hour, time.Now()), loc, OpenOptions{})
		if err != nil {
			return fmt.Errorf("%s: open: %w", step, err)
		}
		c, err := r.Resolve("main")
		if err != nil {
			return fmt.Errorf("%s: resolve: %w", step, err)
		}
		root, err := r.ReadTree(c.Tree)
		if err != nil {
			return fmt.Errorf("%s: tree: %w", step, err)
		}
		i := slices.IndexFunc(root, func(e object.TreeEntry) bool { return e.Name == "deploy" })
		if i < 0 {
			return fmt.Errorf("%s: no deploy/ in %v", step, root)
		}
		deploy, err := r.ReadTree(root[i].Hash)
		if err != nil {
			return fmt.Errorf("%s: deploy/: %w", step, err)
		}
		if len(deploy) != 1 || deploy[0].Name != "a.yaml" {
			return fmt.Errorf("%s: deploy/ holds %v", step, deploy)
		}
		if _, err := r.ReadBlob(deploy[0].Hash); err != nil {
			return fmt.Errorf("%s: deploy/a.yaml: %w", step, err)
		}
		return nil
	}
	if err := read("first"); err != nil {
		t.Fatal(err)
	}
	clones, _ := filepath.Glob(filepath.Join(dir, "*-app"))
	if len(clones) != 1 {
		t.Fatalf("clones: %v", clones)
	}

	// The packs are lost (a disk's fault, a cleanup gone wrong), and the
	// controller restarts over the cache: the read that finds deploy/
	// missing fails, saying so; the next Open clones again.
	packs, _ := filepath.Glob(filepath.Join(clones[0], "objects", "pack", "*"))
	for _, p := range packs {
		os.Remove(p)
	}
	cache = NewCache(dir)
	if err := read("packs lost"); err == nil {
		t.Fatal("a clone without its objects read deploy/")
	} else if !strings.Contains(err.Error(), "object not found") {
		t.Errorf("the damaged read: %v", err)
	}
	if err := read("after"); err != nil {
		t.Fatalf("the damaged clone was not cloned again: %v", err)
	}

	// The whole clone deleted.
	if err := os.RemoveAll(clones[0]); err != nil {
		t.Fatal(err)
	}
	if err := read("deleted"); err != nil {
		t.Fatalf("a deleted clone was not cloned again: %v", err)
	}
}

// A fetch that ends because its caller gave up (a reconcile's deadline,
// a leader stepping down) says nothing of the remote: the next caller
// asks it at once rather than waiting out a backoff, for every sync of
// the repository.
func TestACallerGivingUpStartsNoBackoff(t *testing.T) {
	srv, url := servedApp(t)
	var requests askCounter
	cache := NewCache(t.TempDir(), WithObserver(requests.observe))
	asked := requests.asked
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(context.Background(), time.Nanosecond)

	// The first open (a clone) and a later refresh, each given up on.
	for _, step := range []string{"clone", "refresh"} {
		srv.Delay(func(*http.Request) time.Duration { return 3 * time.Second })
		ctx, cancel := context.WithTimeout(every, 200*time.Millisecond)
		_, err := cache.Open(ctx, loc, OpenOptions{})
		cancel()
		srv.Delay(nil)
		if err == nil {
			t.Fatalf("%s: a fetch held past its caller's deadline succeeded", step)
		}
		var re *backoff.RetryError
		if errors.As(err, &re) {
			t.Fatalf("%s: the caller's own deadline started a backoff: %v", step, err)
		}
		asked()
		if _, err := cache.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatalf("%s: the next caller, with the remote healthy, was answered %v", step, err)
		}
		if n := asked(); n == 0 {
			t.Fatalf("%s: the next caller did not ask the remote", step)
		}
	}
}

// servedApp is a repository app with one commit on a loopback git
// server.
func servedApp(t *testing.T) (*testenv.GitServer, string) {
	t.Helper()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")
	return srv, url
}

// askCounter counts what a Cache's clones ask their remotes
// (WithObserver).
type askCounter struct {
	mu sync.Mutex
	n  int
}

func (a *askCounter) observe(string) { a.mu.Lock(); a.n++; a.mu.Unlock() }

// asked is how many were asked since it was last called.
func (a *askCounter) asked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.n
	a.n = 0
	return n
}
