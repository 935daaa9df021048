package hydrate

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"os"
	"path/filepath"
	"sync"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// ProvenanceCache remembers decoded provenance records by the git tree
// hash of their folder (or, where that is unknown, the blob hash of the
// record), across runs, in one file. A run that finds
// nothing to do then reads one file instead of reading and parsing the
// YAML of every destination folder. The key is the content's hash, so an
// entry can never be stale.
type ProvenanceCache struct {
	path string

	mu      sync.Mutex
	entries map[string]*v1alpha1.Provenance
	used    map[string]bool
	dirty   bool
	shared  bool // in memory only, for runs to share
}

// maxProvenanceEntries bounds the file: beyond it, entries this run did
// not use are dropped.
const maxProvenanceEntries = 20000

// NewProvenanceCache is a cache kept in memory only, for runs to share
// (a controller's batches): it holds maxProvenanceEntries at most, and
// starts again empty past them.
func NewProvenanceCache() *ProvenanceCache {
	return &ProvenanceCache{entries: map[string]*v1alpha1.Provenance{}, used: map[string]bool{}, shared: true}
}

func loadProvenanceCache(dir string) *ProvenanceCache {
	c := &ProvenanceCache{entries: map[string]*v1alpha1.Provenance{}, used: map[string]bool{}}
	if dir == "" {
		return c
	}
	c.path = filepath.Join(dir, "provenance-v1.gob")
	if f, err := os.Open(c.path); err == nil {
		defer f.Close()
		if gob.NewDecoder(bufio.NewReader(f)).Decode(&c.entries) != nil {
			c.entries = map[string]*v1alpha1.Provenance{} // a damaged cache is an empty one
		}
	}
	return c
}

func (c *ProvenanceCache) get(blob string) *v1alpha1.Provenance {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.entries[blob]
	if ok && !c.shared {
		c.used[blob] = true
	}
	return p
}

func (c *ProvenanceCache) put(blob string, p *v1alpha1.Provenance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shared && len(c.entries) >= maxProvenanceEntries {
		clear(c.entries) // keys are content hashes: an entry is never stale, only gone
		clear(c.used)
	}
	c.entries[blob] = p
	if !c.shared {
		c.used[blob] = true
	}
	c.dirty = true
}

// save writes the cache back if it changed, atomically.
func (c *ProvenanceCache) save() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" || !c.dirty {
		return
	}
	if len(c.entries) > maxProvenanceEntries {
		for k := range c.entries {
			if !c.used[k] {
				delete(c.entries, k)
			}
		}
	}
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(c.entries); err != nil {
		return
	}
	source.WriteFile(c.path, b.Bytes()) // a failure only costs the next run its shortcut
}
