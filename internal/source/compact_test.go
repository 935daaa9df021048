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

// A long-lived clone gathers a pack with every fetch; past maxPacks they
// are rolled up, however young: the clone never holds many more, every
// commit still reads, a write not pushed yet keeps its objects, and no
// descriptor of a removed pack stays open.
func TestManyFetchesArePackedIntoOne(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	cache := NewCache(t.TempDir())
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var commits []string
	var r *Repo
	var unpushed plumbing.Hash
	most := 0
	for i := range 3 * maxPacks {
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint(i))
		w.Push("main")
		commits = append(commits, w.Head())
		var err error
		if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
		if i == maxPacks/2 {
			unpushed = writeInFlight(t, r)
		}
		n := len(listPacks(r.Root()))
		if n > maxPacks+1 {
			t.Fatalf("%d packs after %d fetches: they were not rolled up", n, i+1)
		}
		most = max(most, n)
	}
	if most < maxPacks {
		t.Fatalf("at most %d packs: the test never reached a roll-up", most)
	}
	for i, c := range commits {
		if got := readAt(t, r, c, "a"); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("commit %d (%s) reads %q after packing", i, c[:8], got)
		}
	}
	if got := readAt(t, r, unpushed.String(), "b"); got != "not pushed yet\n" {
		t.Fatalf("the write in flight reads %q after packing", got)
	}
	noRemovedPackOpen(t, r)
}

// Once more than maxPacks packs are all older than packGrace, the clone is
// packed whole: one pack of what its refs reach, and what none reaches
// (a write given up, a force-pushed branch's old commits) dropped.
func TestAClonesOldPacksArePackedWhole(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a": "0\n"}).Commit("0")
	w.Push("main")
	cache := NewCache(t.TempDir())
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	r, err := cache.Open(every, loc, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var strays []plumbing.Hash
	for len(listPacks(r.Root())) <= maxPacks {
		strays = append(strays, writeInFlight(t, r))
	}
	old := time.Now().Add(-2 * packGrace)
	p, _ := filepath.Glob(filepath.Join(r.Root(), "objects", "pack", "*"))
	for _, f := range p {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	w.Write(map[string]string{"a": "1\n"}).Commit("1")
	w.Push("main")
	if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(listPacks(r.Root())); n > 2 {
		t.Fatalf("%d packs: more than %d packs older than %s were not packed whole", n, maxPacks, packGrace)
	}
	if got := readAt(t, r, w.Head(), "a"); got != "1\n" {
		t.Fatalf("the fetched commit reads %q", got)
	}
	for _, h := range strays {
		if _, err := r.git.Storer.EncodedObject(plumbing.CommitObject, h); err == nil {
			t.Fatalf("commit %s, which no ref reaches, outlived packing the clone whole", h.String()[:8])
		}
	}
	noRemovedPackOpen(t, r)
}

// Two processes may share a cache's directory (two `sluice hydrate` runs):
// one rolling up the packs the other had indexed leaves the other reading
// every object still, from the new pack, rather than calling its clone
// damaged and cloning it again.
func TestAClonePackedByAnotherProcessStillReads(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	dir := t.TempDir()
	loc := mustLoc(t, url)
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	packer := NewCache(dir)
	var commits []string
	for i := range maxPacks {
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint(i))
		w.Push("main")
		commits = append(commits, w.Head())
		if _, err := packer.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The other process opens the clone as it is: it indexes its packs
	// and reads the latest commit only.
	other := NewCache(dir)
	r, err := other.Open(ctx, loc, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, r, commits[len(commits)-1], "a"); got != fmt.Sprintf("%d\n", len(commits)-1) {
		t.Fatalf("the other process reads %q", got)
	}
	before := len(listPacks(r.Root()))
	// The first process fetches on until it rolls the packs up.
	for i := 0; len(listPacks(r.Root())) >= before; i++ {
		if i == 3 {
			t.Fatalf("%d packs before, %d after: nothing was rolled up, the test shows nothing", before, len(listPacks(r.Root())))
		}
		w.Write(map[string]string{"b": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint("b", i))
		w.Push("main")
		if _, err := packer.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range commits {
		if got := readAt(t, r, c, "a"); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("commit %d reads %q in the other process", i, got)
		}
	}
	if err := r.health(); err != nil {
		t.Errorf("the other process calls its clone damaged: %v", err)
	}
}

// writeInFlight writes a commit no ref names, in a pack of its own, as a
// hydration does before its push.
func writeInFlight(t *testing.T, r *Repo) plumbing.Hash {
	t.Helper()
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
	c, err := b.WriteCommit(&object.Commit{Author: sig, Committer: sig, Message: fmt.Sprint("in flight ", time.Now().UnixNano()), TreeHash: tree})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// A clone rolls up its small packs and leaves a big one as it is: the
// packing costs what the small packs hold, not the repository. Every
// object of the packs rolled up stays, reachable or not.
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
	stray := writeInFlight(t, r)
	commits := []string{w.Head()}
	rolled := false
	for i := range 2 * maxPacks {
		w.Write(map[string]string{"a": fmt.Sprintf("%d\n", i)}).Commit(fmt.Sprint(i))
		w.Push("main")
		commits = append(commits, w.Head())
		before := len(listPacks(r.Root()))
		if r, err = cache.Open(every, loc, OpenOptions{}); err != nil {
			t.Fatal(err)
		}
		after := listPacks(r.Root())
		rolled = rolled || len(after) < before
		if !slices.ContainsFunc(after, func(p packInfo) bool { return p.hash == bigPack.hash }) {
			t.Fatalf("fetch %d: the big pack %s was packed again with the small ones (%d packs now)", i, bigPack.hash.String()[:8], len(after))
		}
	}
	if !rolled {
		t.Fatal("no roll-up happened: the test shows nothing")
	}
	for i, c := range commits {
		want := fmt.Sprintf("%d\n", i-1)
		if i == 0 {
			want = "start\n"
		}
		if got := readAt(t, r, c, "a"); got != want {
			t.Fatalf("commit %d (%s) reads %q after the roll-up, want %q", i, c[:8], got, want)
		}
	}
	if _, err := r.git.Storer.EncodedObject(plumbing.CommitObject, stray); err != nil {
		t.Errorf("the commit no ref reaches is gone after the roll-up: %v", err)
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
// maxOpenPacks pack files open however many packs it reads from, and a
// clone nobody opened for idleClose holds no file open until it is read
// again.
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
	most, widest := 0, 0
	const fetches = 2*maxPacks + 5
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
		widest = max(widest, len(listPacks(r.Root())))
	}
	if widest <= maxOpenPacks {
		t.Fatalf("at most %d packs: the test needs more than a clone keeps open", widest)
	}
	if most == 0 || most > maxOpenPacks {
		t.Errorf("reading across up to %d packs held up to %d pack files open, want 1 to %d", widest, most, maxOpenPacks)
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
	// As many fetches as a clone holds packs before it rolls them up.
	for i := range 3*maxOpenPacks + maxPacks {
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
	maxOpenClones = 4
	srv := testenv.NewGitServer(t)
	cache := NewCache(t.TempDir())
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var repos []*Repo
	var heads []string
	most := 0
	for i := range 10 {
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
		// The newest, at most maxOpenClones of them; past the bound, a
		// sweep leaves three quarters of it.
		n := len(holding)
		if n == 0 || n > maxOpenClones || holding[0] != i+1-n || holding[n-1] != i {
			t.Fatalf("after opening %d clones, clones %v hold pack files open, want the newest, at most %d", i+1, holding, maxOpenClones)
		}
		if i+1 > maxOpenClones && i > 0 && n < maxOpenClones*3/4 {
			t.Fatalf("after opening %d clones, only clones %v hold pack files open: a sweep closed more than it needed", i+1, holding)
		}
		most = max(most, n)
	}
	if most != maxOpenClones {
		t.Errorf("at most %d clones held files open at once, want the bound, %d, reached", most, maxOpenClones)
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

// A clone only written to (a destination: each hydration a commit and a
// push, its fetches an interval apart) rolls its packs up as it writes:
// it never holds more than maxPacks of them for its next fetch to merge
// (the controller's idle interval merged the hundreds a busy minute left).
func TestAClonePushedToRollsItsPacksUpAsItWrites(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "deploy")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a": "0\n"}).Commit("zero")
	w.Push("main")
	r, err := NewCache(t.TempDir()).Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tip, err := r.Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for i := range 3 * maxPacks {
		b := r.NewBatch()
		blob, err := b.WriteBlob(fmt.Appendf(nil, "%d\n", i+1))
		if err != nil {
			t.Fatal(err)
		}
		tree, err := b.WriteTree([]object.TreeEntry{{Name: "a", Mode: filemode.Regular, Hash: blob}})
		if err != nil {
			t.Fatal(err)
		}
		sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}
		c, err := b.WriteCommit(&object.Commit{Author: sig, Committer: sig, Message: fmt.Sprint(i), TreeHash: tree, ParentHashes: []plumbing.Hash{tip}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := r.UpdateBranch(ctx, "main", c, tip, UpdateBranchOptions{}); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		tip = c
		most = max(most, len(listPacks(r.Root())))
	}
	if most > maxPacks+1 {
		t.Errorf("%d pushes without a fetch left up to %d packs in the clone, want at most %d", 3*maxPacks, most, maxPacks+1)
	}
	if got := readAt(t, r, tip.String(), "a"); got != fmt.Sprintf("%d\n", 3*maxPacks) {
		t.Errorf("the tip reads %q after the roll-ups", got)
	}
	fresh, err := NewCache(t.TempDir()).Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if main, err := fresh.Branch("main"); err != nil || main != tip {
		t.Errorf("the server's main is %s, %v; want %s", main, err, tip)
	}
}

// A clone closed for the bound on open files (or idle) still knows the
// tree of each commit it read: an interval's check of a source that did
// not move reads nothing from its packs.
func TestAClosedCloneResolvesACommitItReadWithoutItsPacks(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")
	r, err := NewCache(t.TempDir()).Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	head := plumbing.NewHash(w.Head())
	want, err := r.CommitTree(head)
	if err != nil {
		t.Fatal(err)
	}
	if !r.closeFiles() {
		t.Fatal("the clone was in use")
	}
	packs := filepath.Join(r.Root(), "objects", "pack")
	if err := os.Rename(packs, packs+".away"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(packs+".away", packs)
	got, err := r.CommitTree(head)
	if err != nil || got != want {
		t.Errorf("after its files were closed, commit %s resolves to %s, %v; want %s without reading a pack", head, got, err, want)
	}
}
