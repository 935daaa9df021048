package source

import (
	"fmt"
	"sort"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Batch gathers new objects in memory and writes them into the repository
// as one pack file: a commit of a few hundred folders is then one file
// write, not thousands of loose objects.
type Batch struct {
	repo   *Repo
	mu     sync.Mutex
	mem    *memory.Storage
	hashes []plumbing.Hash
	seen   map[plumbing.Hash]bool
}

// NewBatch starts a batch of writes into r.
func (r *Repo) NewBatch() *Batch {
	return &Batch{repo: r, mem: memory.NewStorage(), seen: map[plumbing.Hash]bool{}}
}

// NewMemoryBatch starts a batch that belongs to no repository: it only
// computes the hashes objects would have.
func NewMemoryBatch() *Batch {
	return &Batch{mem: memory.NewStorage(), seen: map[plumbing.Hash]bool{}}
}

func (b *Batch) put(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, err := b.mem.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if !b.seen[h] {
		b.seen[h] = true
		b.hashes = append(b.hashes, h)
	}
	return h, nil
}

// WriteBlob stages a file's content and returns its hash.
func (b *Batch) WriteBlob(data []byte) (plumbing.Hash, error) {
	obj := b.mem.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.put(obj)
}

// WriteTree stages a tree of the entries, sorted in git's order.
func (b *Batch) WriteTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sorted := append([]object.TreeEntry(nil), entries...)
	sort.Sort(object.TreeEntrySorter(sorted))
	obj := b.mem.NewEncodedObject()
	if err := (&object.Tree{Entries: sorted}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.put(obj)
}

// WriteCommit stages a commit.
func (b *Batch) WriteCommit(c *object.Commit) (plumbing.Hash, error) {
	obj := b.mem.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.put(obj)
}

// ReadTree returns the entries of a tree staged in the batch or stored in
// the repository.
func (b *Batch) ReadTree(h plumbing.Hash) ([]object.TreeEntry, error) {
	b.mu.Lock()
	obj, err := b.mem.EncodedObject(plumbing.TreeObject, h)
	b.mu.Unlock()
	if err == nil {
		t := &object.Tree{}
		if err := t.Decode(obj); err != nil {
			return nil, err
		}
		return t.Entries, nil
	}
	if b.repo == nil {
		return nil, err
	}
	return b.repo.ReadTree(h)
}

// Flush writes the staged objects into the repository as one pack.
func (b *Batch) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.hashes) == 0 {
		return nil
	}
	if b.repo == nil {
		return fmt.Errorf("a memory batch cannot be flushed")
	}
	b.repo.mu.Lock()
	defer b.repo.mu.Unlock()
	pw, ok := b.repo.git.Storer.(storer.PackfileWriter)
	if !ok {
		for _, h := range b.hashes {
			obj, err := b.mem.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				return err
			}
			if _, err := b.repo.git.Storer.SetEncodedObject(obj); err != nil {
				return err
			}
		}
		return nil
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, b.mem, false).Encode(b.hashes, 0); err != nil {
		w.Close()
		return fmt.Errorf("writing pack: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("writing pack: %w", err)
	}
	b.hashes, b.seen = nil, map[plumbing.Hash]bool{}
	b.mem = memory.NewStorage()
	return nil
}
