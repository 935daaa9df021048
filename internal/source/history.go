package source

import (
	"errors"
	"path"
	"strings"
	"time"

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
}

// History walks the first parents back from the commit from, and returns
// the newest max commits that changed folder (a path in the repository,
// "." or "" for all of it), reading at most scan commits.
func (r *Repo) History(from plumbing.Hash, folder string, max, scan int) ([]LogEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	folder = strings.Trim(path.Clean("/"+folder), "/")
	var out []LogEntry
	c, err := r.git.CommitObject(from)
	if err != nil {
		return nil, err
	}
	at, err := folderTree(c, folder)
	if err != nil {
		return nil, err
	}
	for range scan {
		if len(out) >= max {
			break
		}
		var parent *object.Commit
		parentAt := plumbing.ZeroHash
		if c.NumParents() > 0 {
			if parent, err = c.Parent(0); err != nil {
				return out, err
			}
			if parentAt, err = folderTree(parent, folder); err != nil {
				return out, err
			}
		}
		if at != parentAt {
			e := LogEntry{Hash: c.Hash.String(), Author: c.Author.Name, When: c.Author.When, Subject: strings.SplitN(strings.TrimSpace(c.Message), "\n", 2)[0]}
			if !at.IsZero() {
				e.Tree = at.String()
			}
			out = append(out, e)
		}
		if parent == nil {
			break
		}
		c, at = parent, parentAt
	}
	return out, nil
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
