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
}

// WriteOptions say how to commit.
type WriteOptions struct {
	// Message is the commit message.
	Message string
	// Author signs the commit; the default is Sluice <sluice@sluice.dev>.
	Author object.Signature
	// From is the branch a missing branch starts from; the default is the
	// repository's default branch, and an orphan when the repository is
	// empty.
	From string
	// Attempts bounds the retries when someone else pushes meanwhile; the
	// default is 5.
	Attempts int
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
		parent, baseTree := b.tip, b.tree
		if parent.IsZero() {
			if parent, baseTree, err = startingPoint(repo, o.From); err != nil {
				return res, err
			}
		}
		tree := baseTree
		for _, c := range changes {
			sub, err := writeFolder(repo, c.Files)
			if err != nil {
				return res, fmt.Errorf("writing %s: %w", c.Path, err)
			}
			if tree, err = replace(repo, tree, strings.Split(c.Path, "/"), sub); err != nil {
				return res, fmt.Errorf("writing %s: %w", c.Path, err)
			}
		}
		if tree.IsZero() {
			if tree, err = repo.WriteTree(nil); err != nil {
				return res, err
			}
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
		h, err := repo.WriteCommit(commit)
		if err != nil {
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

// writeFolder stores a folder's files as a tree and returns its hash.
func writeFolder(repo *source.Repo, f Folder) (plumbing.Hash, error) {
	tree := plumbing.ZeroHash
	for _, name := range f.Names() {
		blob, err := repo.WriteBlob(f[name])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if tree, err = replaceEntry(repo, tree, strings.Split(name, "/"), blob, filemode.Regular); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return tree, nil
}

// replace puts the tree sub at a path of tree (removing the path when sub
// is zero) and returns the new tree; the zero hash stands for an empty
// tree, which git does not keep below the root.
func replace(repo *source.Repo, tree plumbing.Hash, parts []string, sub plumbing.Hash) (plumbing.Hash, error) {
	return replaceEntry(repo, tree, parts, sub, filemode.Dir)
}

func replaceEntry(repo *source.Repo, tree plumbing.Hash, parts []string, h plumbing.Hash, mode filemode.FileMode) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !tree.IsZero() {
		es, err := repo.ReadTree(tree)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, es...)
	}
	name := parts[0]
	idx := -1
	for i, e := range entries {
		if e.Name == name {
			idx = i
			break
		}
	}
	newHash, newMode := h, mode
	if len(parts) > 1 {
		child := plumbing.ZeroHash
		if idx >= 0 && entries[idx].Mode == filemode.Dir {
			child = entries[idx].Hash
		}
		var err error
		if newHash, err = replaceEntry(repo, child, parts[1:], h, mode); err != nil {
			return plumbing.ZeroHash, err
		}
		newMode = filemode.Dir
	}
	switch {
	case newHash.IsZero() && idx >= 0:
		entries = append(entries[:idx], entries[idx+1:]...)
	case newHash.IsZero():
	case idx >= 0:
		entries[idx] = object.TreeEntry{Name: name, Mode: newMode, Hash: newHash}
	default:
		entries = append(entries, object.TreeEntry{Name: name, Mode: newMode, Hash: newHash})
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	return repo.WriteTree(entries)
}
