package source

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LogEntry is a commit that changed a folder.
type LogEntry struct {
	Hash    string
	Author  string
	When    time.Time
	Subject string
	// Tree is the folder's tree at this commit ("" when the commit
	// removed it).
	Tree string
	// Folders are those of the folders asked about that the commit
	// changed, and Trees their trees at this commit (BranchHistory).
	Folders, Trees []string
}

// BranchHistory walks the first parents back from the commit from, and
// returns the newest max commits that changed any of folders, each with
// those it changed, reading at most scan commits.
func (r *Repo) BranchHistory(from plumbing.Hash, folders []string, max, scan int) ([]LogEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clean := make([]string, len(folders))
	for i, f := range folders {
		clean[i] = strings.Trim(path.Clean("/"+f), "/")
	}
	c, err := r.git.CommitObject(from)
	if err != nil {
		return nil, err
	}
	trees := func(c *object.Commit) ([]plumbing.Hash, error) {
		out := make([]plumbing.Hash, len(clean))
		for i, f := range clean {
			h, err := folderTree(c, f)
			if err != nil {
				return nil, err
			}
			out[i] = h
		}
		return out, nil
	}
	at, err := trees(c)
	if err != nil {
		return nil, err
	}
	var out []LogEntry
	for range scan {
		if len(out) >= max {
			break
		}
		var parent *object.Commit
		parentAt := make([]plumbing.Hash, len(clean))
		if c.NumParents() > 0 {
			if parent, err = c.Parent(0); err != nil {
				return out, err
			}
			if parentAt, err = trees(parent); err != nil {
				return out, err
			}
		}
		e := LogEntry{Hash: c.Hash.String(), Author: c.Author.Name, When: c.Author.When, Subject: strings.SplitN(strings.TrimSpace(c.Message), "\n", 2)[0]}
		for i := range clean {
			if at[i] != parentAt[i] {
				tree := ""
				if !at[i].IsZero() {
					tree = at[i].String()
				}
				e.Folders, e.Trees = append(e.Folders, folders[i]), append(e.Trees, tree)
			}
		}
		if len(e.Folders) > 0 {
			out = append(out, e)
		}
		if parent == nil {
			break
		}
		c, at = parent, parentAt
	}
	return out, nil
}

// History walks the first parents back from the commit from, and returns
// the newest max commits that changed folder (a path in the repository,
// "." or "" for all of it), reading at most scan commits.
func (r *Repo) History(from plumbing.Hash, folder string, max, scan int) ([]LogEntry, error) {
	out, err := r.BranchHistory(from, []string{folder}, max, scan)
	for i := range out {
		out[i].Tree, out[i].Folders, out[i].Trees = out[i].Trees[0], nil, nil
	}
	return out, err
}

// folderTree is the hash of folder's tree in commit c, zero when c has no
// such folder.
func folderTree(c *object.Commit, folder string) (plumbing.Hash, error) {
	if folder == "" {
		return c.TreeHash, nil
	}
	t, err := c.Tree()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	e, err := t.FindEntry(folder)
	if errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return e.Hash, nil
}

// FirstParent is a commit's first parent; zero for a root commit.
func (r *Repo) FirstParent(h plumbing.Hash) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.git.CommitObject(h)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if c.NumParents() == 0 {
		return plumbing.ZeroHash, nil
	}
	return c.ParentHashes[0], nil
}

// DeleteBranch removes a branch (of the remote, for a clone) if it is
// still at old; a branch already gone is no error.
func (r *Repo) DeleteBranch(ctx context.Context, name string, old plumbing.Hash) error {
	refName := plumbing.NewBranchReferenceName(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.resolved)
	if err := r.mayPush(ctx, name); err != nil {
		return err
	}
	if !r.remote {
		cur, err := r.git.Reference(refName, true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Hash() != old {
			return fmt.Errorf("deleting %s in %s: %w", name, r.loc, ErrStale)
		}
		return r.git.Storer.RemoveReference(refName)
	}
	ctx, err := r.connect(ctx)
	if err != nil {
		return err
	}
	method, url, err := r.creds.method(r.loc.URL)
	if err != nil {
		return err
	}
	unlock, err := lockFile(r.lock)
	if err != nil {
		return err
	}
	defer unlock()
	remote, err := r.git.Remote("origin")
	if err != nil {
		return err
	}
	r.note("push")
	spec := config.RefSpec(":" + refName.String())
	err = remote.PushContext(ctx, &git.PushOptions{RemoteURL: url, RefSpecs: []config.RefSpec{spec}, Auth: method,
		RequireRemoteRefs: []config.RefSpec{config.RefSpec(old.String() + ":" + refName.String())}})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("deleting %s in %s: %w", name, r.loc, redactErr(err))
	}
	delete(r.refs, refName)
	return r.git.Storer.RemoveReference(refName)
}
