package destination

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
)

// Proposal is what Propose left on the head branch.
type Proposal struct {
	// Commit is the head branch's tip: the proposal (zero when Empty).
	Commit plumbing.Hash
	// Base is the base branch's tip it was built on.
	Base plumbing.Hash
	// Changed says the head branch was (re)written.
	Changed bool
	// Empty says nothing is left to propose: the base already holds it.
	Empty bool
	// Left is the head branch's tip when Empty and head is still there
	// (to delete once its pull request is closed).
	Left plumbing.Hash
	// Folders are the folders the proposal changes, each with how many
	// files it adds, changes and removes.
	Folders []FolderStat
}

// FolderStat counts a folder's changed files.
type FolderStat struct {
	Path                    string
	Added, Changed, Removed int
}

// Propose makes head, a branch Sluice owns, the base branch's tip plus
// every folder a proposal holds: the changes given, and the folders an
// earlier proposal on head changed that these do not (other syncs', still
// waiting for review). It is always one commit on the base's current tip,
// so a moved base is a rebase, and conflicts cannot arise in the folders:
// they are the renders. head is force-pushed; base is never written.
func Propose(ctx context.Context, repo *source.Repo, base, head string, changes []Change, o WriteOptions) (Proposal, error) {
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Author.Name == "" {
		o.Author = object.Signature{Name: "Sluice", Email: "sluice@sluice.dev"}
	}
	for range o.Attempts {
		if err := ctx.Err(); err != nil {
			return Proposal{}, err
		}
		b, err := Open(repo, base)
		if err != nil {
			return Proposal{}, err
		}
		if !b.Exists() {
			return Proposal{}, fmt.Errorf("the base branch %s does not exist: a pull request needs one to propose to", base)
		}
		h, err := Open(repo, head)
		if err != nil {
			return Proposal{}, err
		}
		all := slices.Clone(changes)
		var parent plumbing.Hash
		if h.Exists() && !o.Fresh {
			if parent, err = repo.FirstParent(h.tip); err != nil {
				return Proposal{}, err
			}
			carried, err := h.proposed(parent)
			if err != nil {
				return Proposal{}, err
			}
			for _, c := range carried {
				if !slices.ContainsFunc(changes, func(x Change) bool { return x.Path == c.Path }) {
					all = append(all, c)
				}
			}
		}
		batch := repo.NewBatch()
		tree, err := applyChanges(batch, b.tree, all)
		if err != nil {
			return Proposal{}, err
		}
		p := Proposal{Base: b.tip}
		if tree == b.tree {
			p.Empty, p.Left = true, h.tip
			return p, nil
		}
		if h.Exists() && !o.Fresh && parent == b.tip && tree == h.tree {
			p.Commit = h.tip
			p.Folders, err = stat(repo, b.tree, tree, all)
			return p, err
		}
		author := o.Author
		author.When = time.Now()
		c := &object.Commit{Author: author, Committer: author, Message: o.Message, TreeHash: tree, ParentHashes: []plumbing.Hash{b.tip}}
		if err := signing.Sign(c, o.Signer); err != nil {
			return Proposal{}, err
		}
		commit, err := batch.WriteCommit(c)
		if err != nil {
			return Proposal{}, err
		}
		if err := batch.Flush(); err != nil {
			return Proposal{}, err
		}
		if p.Folders, err = stat(repo, b.tree, tree, all); err != nil {
			return Proposal{}, err
		}
		err = repo.UpdateBranch(ctx, head, commit, h.tip, source.UpdateBranchOptions{Force: true})
		if errors.Is(err, source.ErrStale) {
			continue // another writer of head: build on what it left
		}
		if err != nil {
			return Proposal{}, err
		}
		p.Commit, p.Changed = commit, true
		return p, nil
	}
	return Proposal{}, fmt.Errorf("branch %s kept moving: gave up after %d attempts", head, o.Attempts)
}

// proposed are the folders the head branch changes against parent, the
// base it was built on: a folder is one holding a provenance record on
// either side.
func (b *Branch) proposed(parent plumbing.Hash) ([]Change, error) {
	var old plumbing.Hash
	if !parent.IsZero() {
		var err error
		if old, err = b.repo.CommitTree(parent); err != nil {
			return nil, err
		}
	}
	var out []Change
	var walk func(dir string, a, n plumbing.Hash) error
	walk = func(dir string, a, n plumbing.Hash) error {
		if a == n {
			return nil
		}
		ae, err := entries(b.repo, a)
		if err != nil {
			return err
		}
		ne, err := entries(b.repo, n)
		if err != nil {
			return err
		}
		_, aFolder := ae[v1alpha1.ProvenanceFile]
		_, nFolder := ne[v1alpha1.ProvenanceFile]
		if dir != "" && (aFolder || nFolder) {
			out = append(out, Change{Path: dir, Tree: n})
			return nil
		}
		names := map[string]bool{}
		for k := range ae {
			names[k] = true
		}
		for k := range ne {
			names[k] = true
		}
		for name := range names {
			x, y := ae[name], ne[name]
			if x.Hash == y.Hash {
				continue
			}
			xd, yd := x.Mode == filemode.Dir, y.Mode == filemode.Dir
			if !xd && !yd {
				continue // a file outside any folder: not Sluice's
			}
			var xh, yh plumbing.Hash
			if xd {
				xh = x.Hash
			}
			if yd {
				yh = y.Hash
			}
			if err := walk(path.Join(dir, name), xh, yh); err != nil {
				return err
			}
		}
		return nil
	}
	err := walk("", old, b.tree)
	slices.SortFunc(out, func(x, y Change) int { return cmp.Compare(x.Path, y.Path) })
	return out, err
}

// entries are a tree's entries by name; none for the zero hash.
func entries(repo *source.Repo, h plumbing.Hash) (map[string]object.TreeEntry, error) {
	out := map[string]object.TreeEntry{}
	if h.IsZero() {
		return out, nil
	}
	es, err := repo.ReadTree(h)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		out[e.Name] = e
	}
	return out, nil
}

// stat counts, per folder changed, the files the new tree adds, changes
// and removes against the base's.
func stat(repo *source.Repo, baseTree, tree plumbing.Hash, changes []Change) ([]FolderStat, error) {
	var out []FolderStat
	for _, c := range changes {
		a, err := (&Branch{repo: repo, tree: baseTree}).Hashes(c.Path)
		if err != nil {
			return nil, err
		}
		n, err := (&Branch{repo: repo, tree: tree}).Hashes(c.Path)
		if err != nil {
			return nil, err
		}
		s := FolderStat{Path: c.Path}
		for f, h := range n {
			switch old, ok := a[f]; {
			case !ok:
				s.Added++
			case old != h:
				s.Changed++
			}
		}
		for f := range a {
			if _, ok := n[f]; !ok {
				s.Removed++
			}
		}
		if s.Added+s.Changed+s.Removed > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(x, y FolderStat) int { return cmp.Compare(x.Path, y.Path) })
	return out, nil
}
