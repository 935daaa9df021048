package source

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A clone of the cache gathers a pack with every fetch and every write, and
// each pack costs memory for its index (some kilobytes, however few its
// objects) besides an open file. Once a clone holds more than maxPacks
// packs, they are rolled up, as git's geometric repacking does: sorted by
// size, the smallest up to the last that is not at least twice all those
// smaller are packed into one, their objects copied whatever reaches them,
// and the big packs left as they are. Each object is then copied a few
// times over its life, and a compaction, which holds the clone's readers
// back, costs what the small packs hold, not what the repository does. A
// clone holds at most maxPacks packs and a few big ones, however busy, so
// its memory stays flat however long it lives.
//
// When the roll-up takes in every pack and all are older than packGrace,
// the clone is packed whole instead: the objects its branches and tags
// reach, into one pack, the rest dropped (what a force-push or a deleted
// branch left behind). The grace keeps the objects of a write not pushed
// yet: a push gives up a stalled server after two minutes. A roll-up drops
// nothing, so it needs none.
//
// Whatever the packs, a clone keeps at most maxOpenPacks of them open (the
// storage's least recently used are closed), and a clone the Cache has not
// handed out for idleClose closes them all, reopening on its next read.
// Whatever the clones, at most maxOpenClones hold files open: past that,
// the least recently handed out close theirs. A controller's open files
// are bounded by maxOpenClones × maxOpenPacks, however many repositories
// and packs.
const (
	maxPacks     = 10
	packGrace    = 10 * time.Minute
	maxOpenPacks = 8
	// packWindow is how many objects a compaction compares each object
	// with for a delta (git's pack.window).
	packWindow = 10
)

// maxOpenClones is how many clones of a Cache may hold pack files open at
// once (a variable for the tests).
var maxOpenClones = 64

// idleClose is how long a clone goes unused before its files are closed
// (a variable for the tests).
var idleClose = 2 * time.Minute

// compact rolls up a clone's packs once it holds too many, and opens the
// clone again, so that no descriptor or index of a removed pack stays. The
// caller holds r.mu and the clone's lock. A compaction that fails leaves
// the clone's objects as they were, and is logged: the fetch goes on.
func (r *Repo) compact() {
	packs := listPacks(r.root)
	if len(packs) <= maxPacks {
		return
	}
	roll := rollup(packs)
	cutoff := time.Now().Add(-packGrace)
	var err error
	if len(roll) == len(packs) && !slices.ContainsFunc(packs, func(p packInfo) bool { return !p.mod.Before(cutoff) }) {
		var packer *git.Repository
		if packer, err = git.Open(r.serialObjects(), nil); err == nil {
			err = packer.RepackObjects(&git.RepackConfig{OnlyDeletePacksOlderThan: cutoff})
		}
	} else {
		err = r.mergePacks(roll)
	}
	if err == nil {
		var g *git.Repository
		if g, err = openClone(r.root, r.objects); err == nil {
			if c, ok := r.git.Storer.(io.Closer); ok {
				c.Close()
			}
			r.git = g
			r.indexed = nil
			clear(r.trees)
		}
	}
	if err != nil {
		removeTmpPacks(r.root)
		slog.Warn("packing a clone of the cache failed; it stays as it was", "repository", r.loc.String(), "dir", r.root, "error", redactErr(err))
	}
}

// packInfo is one pack of a clone: its hash, size and when it was written.
type packInfo struct {
	hash plumbing.Hash
	size int64
	mod  time.Time
}

// listPacks lists the packs of a clone, in one read of its pack folder.
func listPacks(root string) []packInfo {
	entries, err := os.ReadDir(filepath.Join(root, "objects", "pack"))
	if err != nil {
		return nil
	}
	var out []packInfo
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok || !strings.HasPrefix(name, "pack-") {
			continue // tmp_ packs of a fetch under way, .idx files
		}
		hex := strings.TrimPrefix(name, "pack-")
		if !plumbing.IsHash(hex) {
			continue
		}
		if info, err := e.Info(); err == nil {
			out = append(out, packInfo{hash: plumbing.NewHash(hex), size: info.Size(), mod: info.ModTime()})
		}
	}
	return out
}

// rollup picks the packs to pack into one: sorted by size, the smallest up
// to the last that is smaller than twice all those before it. The packs
// left are each at least twice the size of all the smaller ones together.
func rollup(packs []packInfo) []packInfo {
	packs = slices.Clone(packs)
	slices.SortFunc(packs, func(a, b packInfo) int { return cmp.Compare(a.size, b.size) })
	n := 0
	var sum int64
	for i, p := range packs {
		if p.size < 2*sum {
			n = i + 1
		}
		sum += p.size
	}
	if n < 2 {
		// The packs already grow geometrically (more than maxPacks of
		// them: a clone of gigabytes): only a whole packing shrinks them.
		return packs
	}
	return packs[:n]
}

// mergePacks packs the objects of the given packs into one, and removes
// them. Every object they hold is kept, reachable or not; the new pack is
// complete before any is removed.
func (r *Repo) mergePacks(packs []packInfo) error {
	st, ok := r.git.Storer.(*filesystem.Storage)
	if !ok {
		return nil
	}
	var hashes []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	for _, p := range packs {
		if err := packObjects(r.root, p.hash, func(h plumbing.Hash) {
			if !seen[h] {
				seen[h] = true
				hashes = append(hashes, h)
			}
		}); err != nil {
			return err
		}
	}
	w, err := st.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, r.serialObjects(), false).Encode(hashes, packWindow); err != nil {
		w.Close()
		return fmt.Errorf("writing pack: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("writing pack: %w", err)
	}
	for _, p := range packs {
		if err := st.DeleteOldObjectPackAndIndex(p.hash, time.Time{}); err != nil {
			return err
		}
	}
	return nil
}

// packObjects calls fn with each object a pack's index names.
func packObjects(root string, pack plumbing.Hash, fn func(plumbing.Hash)) error {
	f, err := os.Open(filepath.Join(root, "objects", "pack", "pack-"+pack.String()+".idx"))
	if err != nil {
		return err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReader(f)).Decode(idx); err != nil {
		return fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	entries, err := idx.Entries()
	if err != nil {
		return err
	}
	defer entries.Close()
	for {
		e, err := entries.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fn(e.Hash)
	}
}

// closeFiles closes the clone's open pack files and drops what it holds in
// memory for reading (its packs' indexes, some kilobytes each, and the
// trees it decoded), unless it is in use (it then stays as it is: the next
// sweep tries again). Its next read loads and opens what it needs. It
// keeps which tree each commit it read has (two hashes each, bounded by
// maxCommits): an interval's check of a source that did not move then
// reads nothing from the clone. It reports whether it closed them.
func (r *Repo) closeFiles() bool {
	if !r.mu.TryLock() {
		return false
	}
	defer r.mu.Unlock()
	if c, ok := r.git.Storer.(io.Closer); ok {
		c.Close()
	}
	if s, ok := r.git.Storer.(interface{ Reindex() }); ok {
		s.Reindex()
	}
	clear(r.trees)
	return true
}

// closeIdle closes the files of the clones not handed out for idleClose, at
// most four times per idleClose; and, whenever more than maxOpenClones may
// hold files open, those of the least recently handed out, down to three
// quarters of maxOpenClones: a sweep (a look at every clone of the Cache)
// then comes once per maxOpenClones/4 clones opened, not at each (500
// sources of a controller, opened in turn, swept at every Open).
func (c *Cache) closeIdle(now time.Time) {
	over := c.holding.Load() > int64(maxOpenClones)
	c.mu.Lock()
	if now.Sub(c.swept) < idleClose/4 && !over {
		c.mu.Unlock()
		return
	}
	c.swept = now
	var held []*Repo
	for _, call := range c.repos {
		select {
		case <-call.done:
			if r := call.repo; r != nil && r.holding.Load() {
				held = append(held, r)
			}
		default:
		}
	}
	c.mu.Unlock()
	// Least recently handed out first.
	slices.SortFunc(held, func(a, b *Repo) int { return cmp.Compare(a.opened.Load(), b.opened.Load()) })
	excess := 0
	if over {
		excess = len(held) - maxOpenClones*3/4
	}
	for _, r := range held {
		if excess <= 0 && now.Sub(time.Unix(0, r.opened.Load())) <= idleClose {
			break
		}
		if c.release(r) {
			excess--
		}
	}
}

// release closes a held clone's files; false if it is in use.
func (c *Cache) release(r *Repo) bool {
	if !r.closeFiles() {
		return false
	}
	if r.holding.Swap(false) {
		c.holding.Add(-1)
	}
	return true
}

// serialObjects is the clone's storage, its objects read one at a time:
// what go-git's packfile encoder (a push, a compaction) is given. The
// encoder's delta search reads objects from a goroutine per object type,
// and the storage's open pack files (kept in a map, read at an offset)
// are not safe to share: two reads at once crashed a controller
// ("concurrent map read and map write") in an hour's soak. The contents
// the encoder reads afterwards open files of their own.
func (r *Repo) serialObjects() storage.Storer {
	st, ok := r.git.Storer.(*filesystem.Storage)
	if !ok {
		return r.git.Storer // not a clone's (a test's in-memory repository)
	}
	return &serialStorage{Storage: st}
}

type serialStorage struct {
	*filesystem.Storage
	mu sync.Mutex
}

func (s *serialStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storage.EncodedObject(t, h)
}

func (s *serialStorage) DeltaObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storage.DeltaObject(t, h)
}

func (s *serialStorage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storage.EncodedObjectSize(h)
}

func (s *serialStorage) HasEncodedObject(h plumbing.Hash) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storage.HasEncodedObject(h)
}
