package destination

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
)

// Branch is a branch of a destination repository as of its tip when read.
type Branch struct {
	repo *source.Repo
	name string
	tip  plumbing.Hash
	tree plumbing.Hash
}

// Open reads a branch's tip; a missing branch reads as empty.
func Open(repo *source.Repo, name string) (*Branch, error) {
	b := &Branch{repo: repo, name: name}
	tip, err := repo.Branch(name)
	if err != nil {
		return nil, fmt.Errorf("branch %s: %w", name, err)
	}
	b.tip = tip
	if !tip.IsZero() {
		if b.tree, err = repo.CommitTree(tip); err != nil {
			return nil, fmt.Errorf("branch %s: %w", name, err)
		}
	}
	return b, nil
}

// Name is the branch name.
func (b *Branch) Name() string { return b.name }

// Tip is the commit read, or the zero hash for a missing branch.
func (b *Branch) Tip() plumbing.Hash { return b.tip }

// Exists reports whether the branch exists.
func (b *Branch) Exists() bool { return !b.tip.IsZero() }

// find returns the entry at a path of the branch's tree.
func (b *Branch) find(p string) (object.TreeEntry, bool, error) {
	cur := object.TreeEntry{Mode: filemode.Dir, Hash: b.tree}
	if b.tree.IsZero() {
		return cur, false, nil
	}
	for _, part := range strings.Split(p, "/") {
		if cur.Mode != filemode.Dir {
			return cur, false, nil
		}
		entries, err := b.repo.ReadTree(cur.Hash)
		if err != nil {
			return cur, false, err
		}
		found := false
		for _, e := range entries {
			if e.Name == part {
				cur, found = e, true
				break
			}
		}
		if !found {
			return cur, false, nil
		}
	}
	return cur, true, nil
}

// TreeHash returns the git tree hash of a folder, reading only the trees
// above it; ok is false when the folder is absent.
func (b *Branch) TreeHash(folder string) (string, bool, error) {
	e, ok, err := b.find(folder)
	if err != nil || !ok || e.Mode != filemode.Dir {
		return "", false, err
	}
	return e.Hash.String(), true, nil
}

// Hashes lists a folder's files with their blob hashes, without reading
// them; nil when the folder is absent.
func (b *Branch) Hashes(folder string) (map[string]string, error) {
	e, ok, err := b.find(folder)
	if err != nil || !ok || e.Mode != filemode.Dir {
		return nil, err
	}
	out := map[string]string{}
	var walk func(prefix string, h plumbing.Hash) error
	walk = func(prefix string, h plumbing.Hash) error {
		entries, err := b.repo.ReadTree(h)
		if err != nil {
			return err
		}
		for _, c := range entries {
			p := path.Join(prefix, c.Name)
			if c.Mode == filemode.Dir {
				if err := walk(p, c.Hash); err != nil {
					return err
				}
				continue
			}
			out[p] = c.Hash.String()
		}
		return nil
	}
	return out, walk("", e.Hash)
}

// ReadFile reads a file of the branch; ok is false when it is absent.
func (b *Branch) ReadFile(p string) (data []byte, ok bool, err error) {
	e, ok, err := b.find(p)
	if err != nil || !ok || e.Mode == filemode.Dir {
		return nil, false, err
	}
	data, err = b.repo.ReadBlob(e.Hash)
	return data, err == nil, err
}

// ReadFolder reads every file of a folder; nil when it is absent.
func (b *Branch) ReadFolder(folder string) (Folder, error) {
	hashes, err := b.Hashes(folder)
	if err != nil || hashes == nil {
		return nil, err
	}
	f := Folder{}
	for p, h := range hashes {
		data, err := b.repo.ReadBlob(plumbing.NewHash(h))
		if err != nil {
			return nil, err
		}
		f[p] = data
	}
	return f, nil
}

// Change replaces the content of one folder.
type Change struct {
	Path  string
	Files Folder
	// Tree, when set, is the folder's new content as a tree the
	// repository already has (Files is then ignored); a Change with
	// neither removes the folder.
	Tree plumbing.Hash
	// Was, when set, is the folder's tree hash as the change was made
	// against it (the zero hash: no folder there). A write that finds the
	// folder otherwise, because someone else wrote it meanwhile, gives up
	// with ErrFolderMoved rather than put this change over theirs.
	Was *plumbing.Hash
}

// ErrFolderMoved is returned by Write when a folder a change was made
// against was written by someone else meanwhile (see Change.Was).
var ErrFolderMoved = errors.New("written by someone else since it was read")

// WriteOptions say how to commit.
type WriteOptions struct {
	// Message is the commit message.
	Message string
	// Author signs the commit; the default is Sluice <sluice@sluice.dev>.
	Author object.Signature
	// Signer, if set, signs the commit cryptographically (an SSH or
	// OpenPGP key), as `git commit -S` does.
	Signer signing.Signer
	// From is the branch a missing branch starts from; the default is the
	// repository's default branch, and an orphan when the repository is
	// empty.
	From string
	// Attempts bounds the retries when someone else pushes meanwhile; the
	// default is 5.
	Attempts int
	// Edit, when set, makes the changes from the branch as each attempt
	// finds it (the changes given are then ignored): a change that depends
	// on what the folder holds is made again on top of whatever someone
	// else pushed meanwhile, never over it.
	Edit func(b *Branch) ([]Change, error)
	// Fresh makes Propose start from the base alone, ignoring what head
	// holds (its pull request was merged or closed: what it held is not
	// waiting for review any more).
	Fresh bool
}

// Result is what a write did.
type Result struct {
	// Commit is the new tip; the zero hash when nothing changed.
	Commit plumbing.Hash
	// Attempts is how many pushes it took.
	Attempts int
}

// ErrNoChange is returned by Write when the changes leave the branch as
// it is: nothing to commit.
var ErrNoChange = errors.New("nothing changed")

// Write replaces the given folders of a branch in one commit and pushes
// it. A push rejected because the branch moved is redone on top of the
// new tip, never forced, up to Attempts times.
func Write(ctx context.Context, repo *source.Repo, branch string, changes []Change, o WriteOptions) (Result, error) {
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Author.Name == "" {
		o.Author = object.Signature{Name: "Sluice", Email: "sluice@sluice.dev"}
	}
	var res Result
	for res.Attempts = 1; res.Attempts <= o.Attempts; res.Attempts++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		b, err := Open(repo, branch)
		if err != nil {
			return res, err
		}
		if o.Edit != nil {
			if changes, err = o.Edit(b); err != nil {
				return res, err
			}
		}
		if err := b.unmoved(changes); err != nil {
			return res, err
		}
		parent, baseTree := b.tip, b.tree
		if parent.IsZero() {
			if parent, baseTree, err = startingPoint(repo, o.From); err != nil {
				return res, err
			}
		}
		batch := repo.NewBatch()
		tree, err := applyChanges(batch, baseTree, changes)
		if err != nil {
			return res, err
		}
		if tree == b.tree && b.Exists() {
			return res, ErrNoChange
		}
		author := o.Author
		author.When = time.Now()
		commit := &object.Commit{Author: author, Committer: author, Message: o.Message, TreeHash: tree}
		if !parent.IsZero() {
			commit.ParentHashes = []plumbing.Hash{parent}
		}
		if err := signing.Sign(commit, o.Signer); err != nil {
			return res, err
		}
		h, err := batch.WriteCommit(commit)
		if err != nil {
			return res, err
		}
		if err := batch.Flush(); err != nil {
			return res, err
		}
		err = repo.UpdateBranch(ctx, branch, h, b.tip, source.UpdateBranchOptions{})
		if errors.Is(err, source.ErrStale) {
			continue
		}
		if err != nil {
			return res, err
		}
		res.Commit = h
		return res, nil
	}
	return res, fmt.Errorf("branch %s kept moving: gave up after %d attempts", branch, o.Attempts)
}

// unmoved checks that every folder a change was made against is still as
// it was read, or already holds what the change writes.
func (b *Branch) unmoved(changes []Change) error {
	for _, c := range changes {
		if c.Was == nil {
			continue
		}
		folder := strings.Trim(path.Clean(c.Path), "/")
		now := plumbing.ZeroHash
		if h, ok, err := b.TreeHash(folder); err != nil {
			return fmt.Errorf("branch %s: %s: %w", b.name, folder, err)
		} else if ok {
			now = plumbing.NewHash(h)
		}
		if now == *c.Was {
			continue
		}
		want := c.Tree
		if want.IsZero() && c.Files != nil {
			h, err := c.Files.TreeHash()
			if err != nil {
				return err
			}
			want = plumbing.NewHash(h)
		}
		if now == want {
			continue
		}
		return fmt.Errorf("%s on %s (now at commit %s): %w", folder, b.name, short(b.tip), ErrFolderMoved)
	}
	return nil
}

func short(h plumbing.Hash) string { return h.String()[:12] }

// startingPoint is the commit and tree a new branch starts from.
func startingPoint(repo *source.Repo, from string) (plumbing.Hash, plumbing.Hash, error) {
	if from == "" {
		from = repo.DefaultBranch()
	}
	if from == "" {
		return plumbing.ZeroHash, plumbing.ZeroHash, nil
	}
	tip, err := repo.Branch(from)
	if err != nil || tip.IsZero() {
		return plumbing.ZeroHash, plumbing.ZeroHash, err
	}
	tree, err := repo.CommitTree(tip)
	return tip, tree, err
}

// edit is what a write does to one directory of the tree: replace some
// entries by new subtrees (the zero hash removes them), and descend into
// others.
type edit struct {
	replace  map[string]plumbing.Hash
	children map[string]*edit
}

func newEdit() *edit { return &edit{replace: map[string]plumbing.Hash{}, children: map[string]*edit{}} }

// applyChanges replaces the changed folders of base in one pass: every
// directory on the way is read and written once, however many folders
// change under it.
func applyChanges(batch *source.Batch, base plumbing.Hash, changes []Change) (plumbing.Hash, error) {
	root := newEdit()
	for _, c := range changes {
		sub := c.Tree
		if sub.IsZero() && len(c.Files) > 0 {
			var err error
			if sub, err = writeFolder(batch, c.Files); err != nil {
				return plumbing.ZeroHash, fmt.Errorf("writing %s: %w", c.Path, err)
			}
		}
		parts := strings.Split(c.Path, "/")
		e := root
		for _, p := range parts[:len(parts)-1] {
			next, ok := e.children[p]
			if !ok {
				next = newEdit()
				e.children[p] = next
			}
			e = next
		}
		e.replace[parts[len(parts)-1]] = sub
	}
	tree, err := apply(batch, base, root)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if tree.IsZero() {
		return batch.WriteTree(nil) // git keeps an empty root tree
	}
	return tree, nil
}

// apply returns tree with the edit done; the zero hash stands for an empty
// tree, which git does not keep below the root.
func apply(batch *source.Batch, tree plumbing.Hash, e *edit) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if !tree.IsZero() {
		es, err := batch.ReadTree(tree)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		for _, en := range es {
			entries[en.Name] = en
		}
	}
	set := func(name string, h plumbing.Hash) {
		if h.IsZero() {
			delete(entries, name)
		} else {
			entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		}
	}
	for name, h := range e.replace {
		set(name, h)
	}
	for name, child := range e.children {
		sub := plumbing.ZeroHash
		if en, ok := entries[name]; ok && en.Mode == filemode.Dir {
			sub = en.Hash
		}
		h, err := apply(batch, sub, child)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		set(name, h)
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	list := make([]object.TreeEntry, 0, len(entries))
	for _, en := range entries {
		list = append(list, en)
	}
	return batch.WriteTree(list)
}

// writeFolder stages a folder's files as a tree, each directory written
// once, and returns its hash.
func writeFolder(batch *source.Batch, f Folder) (plumbing.Hash, error) {
	type dir struct {
		files map[string]plumbing.Hash
		dirs  map[string]*dir
	}
	newDir := func() *dir { return &dir{files: map[string]plumbing.Hash{}, dirs: map[string]*dir{}} }
	root := newDir()
	for name, data := range f {
		blob, err := batch.WriteBlob(data)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		parts := strings.Split(name, "/")
		d := root
		for _, p := range parts[:len(parts)-1] {
			if d.dirs[p] == nil {
				d.dirs[p] = newDir()
			}
			d = d.dirs[p]
		}
		d.files[parts[len(parts)-1]] = blob
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		var entries []object.TreeEntry
		for n, h := range d.files {
			entries = append(entries, object.TreeEntry{Name: n, Mode: filemode.Regular, Hash: h})
		}
		for n, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			entries = append(entries, object.TreeEntry{Name: n, Mode: filemode.Dir, Hash: h})
		}
		return batch.WriteTree(entries)
	}
	return write(root)
}
