package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice.dev/sluice/internal/testenv"
)

// A git server that is slow is waited for; one that accepts a request and
// then sends nothing is given up once nothing has moved for the stall
// timeout, fetching and pushing alike, and the error says so.
func TestAGitServerThatStallsIsGivenUp(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)

	// Slow: each request answered after 1s, under a 3s stall timeout.
	srv.Delay(func(*http.Request) time.Duration { return time.Second })
	cache := NewCache(t.TempDir(), WithStallTimeout(3*time.Second))
	repo, err := cache.Open(every, loc, OpenOptions{})
	if err != nil {
		t.Fatalf("a slow server: %v", err)
	}
	tip, _ := repo.Branch("main")
	if tip.String() != w.Head() {
		t.Fatalf("main is %s, want %s", tip, w.Head())
	}

	// Hung: nothing at all, under a 2s stall timeout.
	srv.Delay(func(*http.Request) time.Duration { return time.Hour })
	hung := NewCache(t.TempDir(), WithStallTimeout(2*time.Second))
	start := time.Now()
	_, err = hung.Open(every, loc, OpenOptions{})
	if took := time.Since(start); err == nil || took > 10*time.Second {
		t.Fatalf("an Open of a hung server returned after %s: %v", took, err)
	}
	if !strings.Contains(err.Error(), "sent nothing for 2s") {
		t.Errorf("the error does not say the server stalled: %v", err)
	}

	// A push to it, from a clone made while it answered.
	srv.Delay(nil)
	pusher := NewCache(t.TempDir(), WithStallTimeout(2*time.Second))
	repo, err = pusher.Open(ctx, loc, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := repo.NewBatch()
	tree, _ := repo.CommitTree(tip)
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
	h, err := b.WriteCommit(&object.Commit{Author: sig, Committer: sig, Message: "two", TreeHash: tree, ParentHashes: []plumbing.Hash{tip}})
	if err == nil {
		err = b.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	srv.Delay(func(*http.Request) time.Duration { return time.Hour })
	start = time.Now()
	err = repo.UpdateBranch(ctx, "main", h, tip, UpdateBranchOptions{})
	if took := time.Since(start); err == nil || took > 10*time.Second || !strings.Contains(err.Error(), "sent nothing for 2s") {
		t.Fatalf("a push to a hung server returned after %s: %v", took, err)
	}
}

// A fetch whose connection is reset halfway through the pack fails
// saying so, and leaves the clone as it was: what it held still reads,
// no partial pack is left among its objects, and the next fetch brings
// the commit whole.
func TestAPackCutHalfwayLeavesTheCloneAsItWas(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")
	old := w.Head()
	dir := t.TempDir()
	cache := NewCache(dir)
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	if _, err := cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}

	// A commit whose pack is about 1 MB (random: it does not compress).
	noise := make([]byte, 512<<10)
	rand.Read(noise)
	big := hex.EncodeToString(noise)
	w.Write(map[string]string{"big.txt": big}).Commit("big")
	w.Push("main")
	srv.CutAfter(func(r *http.Request) int64 {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			return 300 << 10
		}
		return -1
	})
	repo, err := cache.Open(every, loc, OpenOptions{})
	if err == nil {
		t.Fatal("a fetch whose pack was cut halfway succeeded")
	}
	t.Logf("the cut fetch: %v", err)
	if !strings.Contains(err.Error(), url) && !strings.Contains(err.Error(), "app.git") {
		t.Errorf("the error does not name the repository: %v", err)
	}
	// As it was.
	repo, err = cache.Open(ctx, loc, OpenOptions{})
	if err != nil {
		t.Fatalf("reading the clone after the cut: %v", err)
	}
	if tip, _ := repo.Branch("main"); tip.String() != old {
		t.Errorf("after the cut main is %s, want the commit before it, %s", tip, old)
	}
	packs := regexp.MustCompile(`^pack-[0-9a-f]{40}\.(pack|idx|rev)$`)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && filepath.Base(filepath.Dir(p)) == "pack" && !fi.IsDir() && !packs.MatchString(fi.Name()) {
			t.Errorf("left behind in the clone: %s (%d bytes)", p, fi.Size())
		}
		return nil
	})

	srv.CutAfter(nil)
	repo, err = cache.Open(ContextWithNotBefore(every, time.Now()), loc, OpenOptions{})
	if err != nil {
		t.Fatalf("the fetch after: %v", err)
	}
	tip, _ := repo.Branch("main")
	if tip.String() != w.Head() {
		t.Fatalf("main is %s, want %s", tip, w.Head())
	}
	tree, _ := repo.CommitTree(tip)
	entries, err := repo.ReadTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "big.txt" {
			data, err := repo.ReadBlob(e.Hash)
			if err != nil || string(data) != big {
				t.Fatalf("big.txt reads %d bytes (%v), want %d", len(data), err, len(big))
			}
			return
		}
	}
	t.Fatal("big.txt is missing from the fetched commit")
}
