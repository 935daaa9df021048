package source

import (
	"cmp"
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
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// A clone of the cache gathers a pack with every fetch and every write.
// Once more than maxOldPacks of them are older than packGrace, the objects
// its branches and tags reach are packed into one and those packs removed,
// as git's gc.autoPackLimit does: a long-lived clone keeps a bounded number
// of packs, so its lookups, its memory and its open files stay flat. Packs
// younger than packGrace stay, with what they hold: the objects of a write
// not pushed yet.
//
// A busy clone (a monorepo fetched at every push) gathers packs faster than
// they age: once it holds more than maxPacks, packs older than
// packShortGrace go too (a write is pushed within minutes: the push gives
// up a stalled server after two).
//
// Whatever the packs, a clone keeps at most maxOpenPacks of them open (the
// storage's least recently used are closed), and a clone the Cache has not
// handed out for idleClose closes them all, reopening on its next read.
// Whatever the clones, at most maxOpenClones hold files open: past that,
// the least recently handed out close theirs. A controller's open files
// are bounded by maxOpenClones × maxOpenPacks, however many repositories
// and packs.
const (
	maxOldPacks    = 50
	packGrace      = time.Hour
	maxPacks       = 100
	packShortGrace = 10 * time.Minute
	maxOpenPacks   = 8
)

// maxOpenClones is how many clones of a Cache may hold pack files open at
// once (a variable for the tests).
var maxOpenClones = 64

// objectCacheSize bounds a Cache's decoded objects, all its clones
// together (go-git's default for one repository).
const objectCacheSize = 96 * cache.MiByte

// idleClose is how long a clone goes unused before its files are closed
// (a variable for the tests).
var idleClose = 2 * time.Minute

// compact packs a clone's objects into one pack once it holds too many old
// packs, and opens the clone again, so that no descriptor of a removed pack
// stays open. The caller holds r.mu and the clone's lock. A compaction that
// fails leaves the clone as it was, and is logged: the fetch goes on.
func (r *Repo) compact() {
	now := time.Now()
	ages := packTimes(r.root)
	cutoff := now.Add(-packGrace)
	if olderThan(ages, cutoff) <= maxOldPacks {
		if len(ages) <= maxPacks {
			return
		}
		cutoff = now.Add(-packShortGrace)
		if olderThan(ages, cutoff) == 0 {
			return // every pack is recent: nothing may go yet
		}
	}
	packer, err := git.Open(r.serialObjects(), nil)
	if err == nil {
		err = packer.RepackObjects(&git.RepackConfig{OnlyDeletePacksOlderThan: cutoff})
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

// packTimes lists when each pack of a clone was written, in one read of
// its pack folder.
func packTimes(root string) []time.Time {
	entries, err := os.ReadDir(filepath.Join(root, "objects", "pack"))
	if err != nil {
		return nil
	}
	var out []time.Time
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pack") || strings.HasPrefix(e.Name(), "tmp_") {
			continue
		}
		if info, err := e.Info(); err == nil {
			out = append(out, info.ModTime())
		}
	}
	return out
}

// olderThan counts the times before cutoff.
func olderThan(times []time.Time, cutoff time.Time) int {
	n := 0
	for _, t := range times {
		if t.Before(cutoff) {
			n++
		}
	}
	return n
}

// closeFiles closes the clone's open pack files and drops what it holds in
// memory for reading (its packs' indexes, some kilobytes each, and the
// trees and commits it decoded), unless it is in use (it then stays as it
// is: the next sweep tries again). Its next read loads and opens what it
// needs. It reports whether it closed them.
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
	clear(r.commits)
	return true
}

// closeIdle closes the files of the clones not handed out for idleClose, at
// most four times per idleClose; and, whenever more than maxOpenClones may
// hold files open, those of the least recently handed out.
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
	excess := len(held) - maxOpenClones
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
