package source

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
)

// A clone of the cache gathers a pack with every fetch and every write.
// Once more than maxOldPacks of them are older than packGrace, the objects
// its branches and tags reach are packed into one and those packs removed,
// as git's gc.autoPackLimit does: a long-lived clone keeps a bounded number
// of packs, so its lookups, its memory and its open files stay flat. Packs
// younger than packGrace stay, with what they hold: the objects of a write
// not pushed yet.
const (
	maxOldPacks = 50
	packGrace   = time.Hour
)

// compact packs a clone's objects into one pack once it holds too many old
// packs, and opens the clone again, so that no descriptor of a removed pack
// stays open. The caller holds r.mu and the clone's lock. A compaction that
// fails leaves the clone as it was, and is logged: the fetch goes on.
func (r *Repo) compact() {
	cutoff := time.Now().Add(-packGrace)
	if oldPacks(r.root, cutoff) <= maxOldPacks {
		return
	}
	err := r.git.RepackObjects(&git.RepackConfig{OnlyDeletePacksOlderThan: cutoff})
	if err == nil {
		var g *git.Repository
		if g, err = openClone(r.root); err == nil {
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

// oldPacks counts the packs of a clone older than cutoff.
func oldPacks(root string, cutoff time.Time) int {
	entries, err := os.ReadDir(filepath.Join(root, "objects", "pack"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pack") || strings.HasPrefix(e.Name(), "tmp_") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			n++
		}
	}
	return n
}
