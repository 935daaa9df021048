package source

import (
	"context"
	"errors"
	"fmt"
)

// Opened is a source as Sluice reads it: the tree of the commit a ref
// names, or a local working tree as it is on disk.
type Opened struct {
	Location Location
	// Ref is the ref read (the location's own "?ref=" wins).
	Ref string
	// FS holds the files.
	FS FS
	// Commit is the commit read; for a working tree, its HEAD ("" outside
	// git).
	Commit string
	// Tree is the commit's tree; nil for a working tree.
	Tree *TreeFS
	// Head is a working tree's HEAD tree, to tell whether it is dirty.
	Head FS
}

// Describe is "LOCATION@SHORTSHA".
func (o *Opened) Describe() string {
	if o.Commit == "" {
		return o.Location.String()
	}
	c := o.Commit
	if len(c) > 7 {
		c = c[:7]
	}
	return o.Location.String() + "@" + c
}

// Working reports whether the source is a working tree read from disk.
func (o *Opened) Working() bool { return o.Tree == nil }

// OpenSource opens repo (a URL or a path relative to baseDir) at ref: a
// local path without a ref is read as it is on disk, uncommitted changes
// included; anything else at the commit its ref names.
func (c *Cache) OpenSource(ctx context.Context, repo, ref, baseDir string) (*Opened, error) {
	return c.OpenSourceWith(ctx, repo, ref, baseDir, nil)
}

// OpenSourceWith is OpenSource with the source's own credentials (nil:
// the Cache's).
func (c *Cache) OpenSourceWith(ctx context.Context, repo, ref, baseDir string, creds *Credentials) (*Opened, error) {
	loc, err := ParseLocation(repo, baseDir)
	if err != nil {
		return nil, err
	}
	if loc.Ref != "" {
		ref = loc.Ref
	}
	o := &Opened{Location: loc, Ref: ref}
	// A local path is read as it is on disk, unless it is a bare
	// repository: that has no files on disk to read, only commits, and is
	// read at its HEAD like a remote.
	if loc.IsLocal() && ref == "" && !IsBare(loc.Path) {
		dir, err := Dir(loc.Path)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", loc, err)
		}
		o.FS = dir
		r, err := c.Open(ctx, loc, OpenOptions{})
		if errors.Is(err, ErrNotRepository) {
			return o, nil
		}
		if err != nil {
			return nil, err
		}
		if cm, err := r.Resolve(""); err == nil {
			o.Commit = cm.Hash.String()
			if head, err := r.Tree(cm); err == nil {
				o.Head = head
			}
		}
		return o, nil
	}
	r, err := c.Open(ctx, loc, OpenOptions{Credentials: creds})
	if err != nil {
		return nil, err
	}
	cm, err := r.Resolve(ref)
	if err != nil {
		return nil, err
	}
	tree, err := r.Tree(cm)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", loc, err)
	}
	o.FS, o.Tree, o.Commit = tree, tree, cm.Hash.String()
	return o, nil
}
