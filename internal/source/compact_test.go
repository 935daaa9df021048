package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice.dev/sluice/internal/testenv"
)

// A long-lived clone gathers a pack with every fetch; once more than
// maxOldPacks of them are older than packGrace they are packed into one:
// every commit still reads, a write not pushed yet keeps its objects, the
// packs of the last hour stay, and no descriptor of a removed pack stays
// open.
func TestManyFetchesArePackedIntoOne(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	dir := t.TempDir()
	cache := NewCache(dir)
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var commits []string
	var r *Repo
	for i := range maxOldPacks + 5 {
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint(i))
		w.Push("main")
		commits = append(commits, w.Head())
		var err error
		if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	packs := func() []string {
		p, _ := filepath.Glob(filepath.Join(r.Root(), "objects", "pack", "*.pack"))
		return p
	}
	if n := len(packs()); n < maxOldPacks+5 {
		t.Fatalf("%d packs after %d fetches: the test needs one a fetch", n, maxOldPacks+5)
	}
	// Young packs stay, however many.
	w.Write(map[string]string{"a": "young\n"}).Commit("young")
	w.Push("main")
	if _, err := cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(packs()); n < maxOldPacks+6 {
		t.Fatalf("%d packs: packs younger than %s were packed", n, packGrace)
	}
	commits = append(commits, w.Head())
	// The packs age past the grace.
	old := time.Now().Add(-2 * packGrace)
	for _, p := range packs() {
		for _, f := range []string{p, strings.TrimSuffix(p, ".pack") + ".idx"} {
			if err := os.Chtimes(f, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A write in flight: its own pack, young, no ref to it yet.
	b := r.NewBatch()
	blob, err := b.WriteBlob([]byte("not pushed yet\n"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := b.WriteTree([]object.TreeEntry{{Name: "b", Mode: filemode.Regular, Hash: blob}})
	if err != nil {
		t.Fatal(err)
	}
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
	unpushed, err := b.WriteCommit(&object.Commit{Author: sig, Committer: sig, Message: "in flight", TreeHash: tree})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	before := len(packs())
	w.Write(map[string]string{"a": "last\n"}).Commit("last")
	w.Push("main")
	commits = append(commits, w.Head())
	if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	// One pack of all the old ones, the write's and the last fetch's.
	if n := len(packs()); n > 3 {
		t.Fatalf("%d packs (%d before the fetch): the old packs were not packed into one", n, before)
	}
	for i, c := range commits {
		want := fmt.Sprintf("%d\n", i)
		switch {
		case i == len(commits)-1:
			want = "last\n"
		case i == len(commits)-2:
			want = "young\n"
		}
		if got := readAt(t, r, c, "a"); got != want {
			t.Fatalf("commit %d (%s) reads %q after packing, want %q", i, c[:8], got, want)
		}
	}
	if got := readAt(t, r, unpushed.String(), "b"); got != "not pushed yet\n" {
		t.Fatalf("the write in flight reads %q after packing", got)
	}
	noRemovedPackOpen(t, r)
}

// Once its old packs are many, a clone rolls up the small ones and leaves
// a big one as it is: the packing costs what the small packs hold, not the
// repository. Every object of the packs rolled up stays, reachable or not.
func TestSmallPacksRollUpBesideABigOne(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	big := make([]byte, 1<<20)
	rand.Read(big)
	w.Write(map[string]string{"big": hex.EncodeToString(big), "a": "start\n"}).Commit("big")
	w.Push("main")
	cache := NewCache(t.TempDir())
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	r, err := cache.Open(every, loc, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := listPacks(r.Root())
	if len(first) != 1 {
		t.Fatalf("%d packs after the clone, want 1", len(first))
	}
	bigPack := first[0]
	commits := []string{w.Head()}
	for i := range maxOldPacks + 5 {
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint(i))
		w.Push("main")
		commits = append(commits, w.Head())
		if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An object no ref reaches, in a pack of its own.
	b := r.NewBatch()
	stray, err := b.WriteBlob([]byte("no ref reaches me\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(listPacks(r.Root())); n < maxOldPacks+7 {
		t.Fatalf("%d packs: the test needs one a fetch", n)
	}
	old := time.Now().Add(-2 * packGrace)
	p, _ := filepath.Glob(filepath.Join(r.Root(), "objects", "pack", "*"))
	for _, f := range p {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	w.Write(map[string]string{"a": "last\n"}).Commit("last")
	w.Push("main")
	commits = append(commits, w.Head())
	if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	after := listPacks(r.Root())
	var kept bool
	for _, p := range after {
		kept = kept || p.hash == bigPack.hash
	}
	if !kept {
		t.Errorf("the big pack %s was packed again with the small ones (%d packs now)", bigPack.hash.String()[:8], len(after))
	}
	// The big pack, the small ones as one, the last fetch's.
	if len(after) > 3 {
		t.Errorf("%d packs after the roll-up, want at most 3", len(after))
	}
	for i, c := range commits {
		want := fmt.Sprintf("%d\n", i-1)
		switch i {
		case 0:
			want = "start\n"
		case len(commits) - 1:
			want = "last\n"
		}
		if got := readAt(t, r, c, "a"); got != want {
			t.Fatalf("commit %d (%s) reads %q after the roll-up, want %q", i, c[:8], got, want)
		}
	}
	if _, err := r.git.Storer.EncodedObject(plumbing.BlobObject, stray); err != nil {
		t.Errorf("the object no ref reaches is gone after the roll-up: %v", err)
	}
	noRemovedPackOpen(t, r)
}

func TestRollupLeavesPacksGrowingGeometrically(t *testing.T) {
	sizes := func(ps []packInfo) []int64 {
		var out []int64
		for _, p := range ps {
			out = append(out, p.size)
		}
		return out
	}
	packs := func(sizes ...int64) []packInfo {
		var out []packInfo
		for _, s := range sizes {
			out = append(out, packInfo{size: s})
		}
		return out
	}
	for _, tc := range []struct {
		in, want []int64
	}{
		{[]int64{1, 1, 1, 1}, []int64{1, 1, 1, 1}},
		{[]int64{1000, 1, 1, 1}, []int64{1, 1, 1}},
		{[]int64{1000, 40, 1, 1, 1}, []int64{1, 1, 1}},
		{[]int64{1000, 4, 1, 1, 1}, []int64{1, 1, 1, 4}},
		{[]int64{1, 1, 8, 1000}, []int64{1, 1}},
		// Already geometric: nothing smaller than a whole packing.
		{[]int64{1, 2, 8, 1000}, []int64{1, 2, 8, 1000}},
	} {
		if got := sizes(rollup(packs(tc.in...))); !slices.Equal(got, tc.want) {
			t.Errorf("rollup(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// noRemovedPackOpen fails the test if this process holds a removed file
// of the clone open.
func noRemovedPackOpen(t *testing.T, r *Repo) {
	t.Helper()
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if strings.HasPrefix(target, r.Root()) && strings.HasSuffix(target, "(deleted)") {
			t.Errorf("a removed pack is still open: %s", target)
		}
	}
}

func readAt(t *testing.T, r *Repo, commit, name string) string {
	t.Helper()
	tree, err := r.CommitTree(plumbing.NewHash(commit))
	if err != nil {
		t.Fatalf("commit %s: %v", commit[:8], err)
	}
	fsys, err := r.Tree(Commit{Hash: plumbing.NewHash(commit), Tree: tree})
	if err != nil {
		t.Fatal(err)
	}
	data, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatalf("commit %s: %v", commit[:8], err)
	}
	return string(data)
}

// packFiles counts the files under a clone's pack folder this process
// holds open.
func packFiles(t *testing.T, r *Repo) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if strings.HasPrefix(target, filepath.Join(r.Root(), "objects", "pack")) {
			n++
		}
	}
	return n
}

// A busy clone (a monorepo fetched at every push) holds at most
// maxOpenPacks pack files open however many packs it reads from; once
// they age they are packed into one; and a clone nobody opened for
// idleClose holds no file open until it is read again.
func TestABusyClonesPacksAndOpenFilesStayBounded(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	other := srv.CreateRepo(t, "other")
	w := testenv.NewWork(t, url)
	o := testenv.NewWork(t, other)
	o.Write(map[string]string{"a": "1\n"}).Commit("one")
	o.Push("main")
	cache := NewCache(t.TempDir())
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var commits []string
	var r *Repo
	most := 0
	const fetches = 2*maxOldPacks + 5
	for i := range fetches {
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint(i))
		w.Push("main")
		commits = append(commits, w.Head())
		var err error
		if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
		// Read the last 20 commits: 20 packs.
		for j := max(0, i-19); j <= i; j++ {
			if got := readAt(t, r, commits[j], "a"); got != fmt.Sprintf("%d\n", j) {
				t.Fatalf("commit %d reads %q", j, got)
			}
		}
		most = max(most, packFiles(t, r))
	}
	packs := func() int {
		p, _ := filepath.Glob(filepath.Join(r.Root(), "objects", "pack", "*.pack"))
		return len(p)
	}
	if n := packs(); n < fetches {
		t.Fatalf("%d packs after %d fetches: the test needs one a fetch", n, fetches)
	}
	if most == 0 || most > maxOpenPacks {
		t.Errorf("reading across %d packs held up to %d pack files open, want 1 to %d", packs(), most, maxOpenPacks)
	}
	// The packs age past the grace.
	old := time.Now().Add(-2 * packGrace)
	p, _ := filepath.Glob(filepath.Join(r.Root(), "objects", "pack", "*"))
	for _, f := range p {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	w.Write(map[string]string{"a": "last\n"}).Commit("last")
	w.Push("main")
	if _, err := cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := packs(); n > 2 {
		t.Fatalf("%d packs: more than %d packs older than %s were not packed", n, maxOldPacks, packGrace)
	}
	for i, c := range commits {
		if got := readAt(t, r, c, "a"); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("commit %d reads %q after packing", i, got)
		}
	}

	// Idle: its files closed at the next sweep (another clone opened).
	defer func(d time.Duration) { idleClose = d }(idleClose)
	idleClose = 50 * time.Millisecond
	if packFiles(t, r) == 0 {
		t.Fatal("no pack file open before the idle time: the test shows nothing")
	}
	time.Sleep(2 * idleClose)
	if _, err := cache.Open(every, mustLoc(t, other), OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := packFiles(t, r); n != 0 {
		t.Errorf("an idle clone holds %d pack files open", n)
	}
	if got := readAt(t, r, commits[0], "a"); got != "0\n" {
		t.Errorf("the idle clone read again: %q", got)
	}
}

// Packing a clone (a push, a compaction) reads its objects through go-git's
// encoder, whose delta search runs a goroutine per object type: spread over
// more packs than a clone keeps open, those reads open and close pack files
// at once. Before the storage the encoder is given read them one at a time,
// reads at once crashed the process ("concurrent map read and map write"
// in the storage's map of open pack files, or an index out of its list),
// as a controller crashed in a soak. Without it this test crashes so, 3
// runs in 3.
func TestPackingAClonesObjectsReadsThemOneAtATime(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	cache := NewCache(t.TempDir())
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var r *Repo
	big := strings.Repeat("a line of a file that changes a little at each commit\n", 200)
	files := map[string]string{}
	for i := range 100 {
		files[fmt.Sprintf("dir/file-with-a-long-name-%03d", i)] = fmt.Sprintf("%d\n", i)
	}
	w.Write(files)
	for i := range 6 * maxOpenPacks {
		// A commit, two trees and blobs, most of them stored as deltas of
		// the commit before's (blobs and trees: the delta search's two
		// goroutines); the first fetch takes half of them in one
		// pack, the others a pack each.
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i), "dir/big": fmt.Sprintf("%d\n%s", i, big)}).Commit(fmt.Sprint(i))
		if i < 3*maxOpenPacks {
			continue
		}
		w.Push("main")
		var err error
		if r, err = cache.Open(every, mustLoc(t, url), OpenOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var hashes []plumbing.Hash
	iter, err := r.git.Storer.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		t.Fatal(err)
	}
	iter.ForEach(func(o plumbing.EncodedObject) error { hashes = append(hashes, o.Hash()); return nil })
	if n := len(listPacks(r.Root())); len(hashes) < 100 || n <= maxOpenPacks {
		t.Fatalf("%d objects in %d packs: the test needs many objects, in more packs than a clone keeps open", len(hashes), n)
	}
	// What the encoder does from its goroutines, many times over: reads of
	// objects spread over more packs than the clone keeps open.
	objs := r.serialObjects()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 20 {
				for i := range hashes {
					h := hashes[(i*(g+1)+k)%len(hashes)]
					if _, err := objs.EncodedObject(plumbing.AnyObject, h); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	// And the encoder packs them through it (its delta search alone does
	// not read at once often enough to crash a test: the reads above do).
	if _, err := packfile.NewEncoder(io.Discard, objs, false).Encode(hashes, 10); err != nil {
		t.Fatal(err)
	}
}

// However many clones a Cache opens, at most maxOpenClones hold pack files
// open: opening one more closes those of the least recently handed out,
// which read again when asked.
func TestManyClonesHoldFewFilesOpen(t *testing.T) {
	ctx := context.Background()
	defer func(n int) { maxOpenClones = n }(maxOpenClones)
	maxOpenClones = 3
	srv := testenv.NewGitServer(t)
	cache := NewCache(t.TempDir())
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var repos []*Repo
	var heads []string
	for i := range 8 {
		url := srv.CreateRepo(t, fmt.Sprintf("app%d", i))
		w := testenv.NewWork(t, url)
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit("one")
		w.Push("main")
		heads = append(heads, w.Head())
		r, err := cache.Open(every, mustLoc(t, url), OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := readAt(t, r, heads[i], "a"); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("clone %d reads %q", i, got)
		}
		repos = append(repos, r)
		var holding []int
		for j, r := range repos {
			if packFiles(t, r) > 0 {
				holding = append(holding, j)
			}
		}
		// The newest maxOpenClones, each having read.
		want := []int{}
		for j := max(0, i+1-maxOpenClones); j <= i; j++ {
			want = append(want, j)
		}
		if fmt.Sprint(holding) != fmt.Sprint(want) {
			t.Fatalf("after opening %d clones, clones %v hold pack files open, want %v", i+1, holding, want)
		}
	}
	// A clone closed for the others reads again.
	if got := readAt(t, repos[0], heads[0], "a"); got != "0\n" {
		t.Errorf("the first clone read again: %q", got)
	}
}

// The clones of a Cache share one object cache: an object one clone read
// is not read through another clone that does not hold it, whatever its
// credentials (a commit named by its hash, as a pinned source names it).
func TestAnObjectCachedForOneCloneIsNotReadThroughAnother(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	private, public := srv.CreateRepo(t, "private"), srv.CreateRepo(t, "public")
	w := testenv.NewWork(t, private)
	w.Write(map[string]string{"secret": "only in the private repository\n"}).Commit("one")
	w.Push("main")
	p := testenv.NewWork(t, public)
	p.Write(map[string]string{"a": "public\n"}).Commit("one")
	p.Push("main")
	cache := NewCache(t.TempDir())
	pr, err := cache.Open(ctx, mustLoc(t, private), OpenOptions{Credentials: &Credentials{Scope: "team-a/git"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, pr, w.Head(), "secret"); got != "only in the private repository\n" {
		t.Fatalf("the private clone reads %q", got)
	}
	pub, err := cache.Open(ctx, mustLoc(t, public), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pub.objects != pr.objects {
		t.Fatal("the clones have an object cache each: the test shows nothing")
	}
	if tree, err := pub.CommitTree(plumbing.NewHash(w.Head())); err == nil {
		t.Fatalf("the public clone read the private commit %s (tree %s) from the shared cache", w.Head()[:8], tree)
	}
}
