package source

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TreeFS is the file system of one tree of a repository (a commit's, or a
// folder's inside it). Symbolic links are followed inside the tree; a link
// that leaves it is an error.
type TreeFS struct {
	repo *Repo
	root plumbing.Hash
}

// Repo is the repository the tree is of.
func (t *TreeFS) Repo() *Repo { return t.repo }

// Tree returns the file system of a commit's tree, rooted at the opened
// location's folder.
func (r *Repo) Tree(c Commit) (*TreeFS, error) {
	t := &TreeFS{repo: r, root: c.Tree}
	if r.prefix == "." || r.prefix == "" {
		return t, nil
	}
	e, err := t.lookup(r.prefix)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", r.prefix, c.Hash, err)
	}
	if !isDir(e.Mode) {
		return nil, fmt.Errorf("%s at %s is not a directory", r.prefix, c.Hash)
	}
	return &TreeFS{repo: r, root: e.Hash}, nil
}

// TreeHash returns the git tree hash of a directory (the root for ".").
func (t *TreeFS) TreeHash(name string) (string, error) {
	e, err := t.lookup(name)
	if err != nil {
		return "", err
	}
	if !isDir(e.Mode) {
		return "", fmt.Errorf("%s is not a directory", name)
	}
	return e.Hash.String(), nil
}

// Direct reports whether a path resolves without following a symbolic
// link (a link's target can change while the folder holding the link does
// not).
func (t *TreeFS) Direct(name string) bool {
	t.repo.mu.Lock()
	defer t.repo.mu.Unlock()
	e, err := t.lookupLocked(name, 0)
	if err != nil {
		return true // absent: the folder's hash covers its absence
	}
	raw, err := t.lookupLocked(name, 40) // no hop allowed: fails on any link
	return err == nil && raw.Hash == e.Hash
}

// lookup resolves a slash-separated path to its tree entry, following
// symbolic links (at most 40, as Linux does).
func (t *TreeFS) lookup(name string) (object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return object.TreeEntry{}, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	t.repo.mu.Lock()
	defer t.repo.mu.Unlock()
	return t.lookupLocked(name, 0)
}

func (t *TreeFS) lookupLocked(name string, hops int) (object.TreeEntry, error) {
	cur := object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: t.root}
	if name == "." {
		return cur, nil
	}
	parts := strings.Split(name, "/")
	for i, part := range parts {
		if !isDir(cur.Mode) {
			return object.TreeEntry{}, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		tree, err := t.repo.tree(cur.Hash)
		if err != nil {
			return object.TreeEntry{}, err
		}
		e, err := tree.FindEntry(part)
		if err != nil {
			return object.TreeEntry{}, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if e.Mode == filemode.Symlink {
			if hops >= 40 {
				return object.TreeEntry{}, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("too many levels of symbolic links")}
			}
			target, err := t.repo.readBlob(e.Hash)
			if err != nil {
				return object.TreeEntry{}, err
			}
			dir := path.Join(parts[:i]...)
			resolved := path.Join(dir, string(target))
			if path.IsAbs(string(target)) || resolved == ".." || strings.HasPrefix(resolved, "../") {
				return object.TreeEntry{}, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("symbolic link to %s leaves the repository", target)}
			}
			rest := path.Join(append([]string{resolved}, parts[i+1:]...)...)
			if rest == "" {
				rest = "."
			}
			return t.lookupLocked(rest, hops+1)
		}
		cur = *e
	}
	return cur, nil
}

// Open implements fs.FS.
func (t *TreeFS) Open(name string) (fs.File, error) {
	e, err := t.lookup(name)
	if err != nil {
		return nil, err
	}
	if isDir(e.Mode) {
		entries, err := t.ReadDir(name)
		if err != nil {
			return nil, err
		}
		return &dirFile{info: entryInfo{name: path.Base(name), mode: e.Mode}, entries: entries}, nil
	}
	data, err := t.repo.ReadBlob(e.Hash)
	if err != nil {
		return nil, err
	}
	return &memFile{info: entryInfo{name: path.Base(name), mode: e.Mode, size: int64(len(data))}, Reader: bytes.NewReader(data)}, nil
}

// ReadFile implements fs.ReadFileFS.
func (t *TreeFS) ReadFile(name string) ([]byte, error) {
	e, err := t.lookup(name)
	if err != nil {
		return nil, err
	}
	if isDir(e.Mode) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("is a directory")}
	}
	return t.repo.ReadBlob(e.Hash)
}

// ReadDir implements fs.ReadDirFS; entries are sorted by name. Symbolic
// links are reported as what they point to; a link out of the tree as a
// link, and a dangling one not at all.
func (t *TreeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := t.lookup(name)
	if err != nil {
		return nil, err
	}
	if !isDir(e.Mode) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fmt.Errorf("not a directory")}
	}
	entries, err := t.repo.ReadTree(e.Hash)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, 0, len(entries))
	for _, c := range entries {
		if !validEntry(c.Name) {
			// git writes no such tree; one that holds it was made to climb
			// out of whatever directory it is checked out in.
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: fmt.Errorf("the tree holds an entry named %q, which git refuses", c.Name)}
		}
		if c.Mode == filemode.Symlink {
			target, err := t.lookup(path.Join(name, c.Name))
			if err != nil {
				if _, lerr := Resolve(t, path.Join(name, c.Name)); !IsLinkError(lerr) {
					continue // a dangling link is not there
				}
				// A link out of the tree is listed as the link it is, so
				// that whoever would read it is told why it cannot.
				out = append(out, entryInfo{name: c.Name, mode: filemode.Symlink})
				continue
			}
			target.Name = c.Name
			c = target
		}
		if c.Mode == filemode.Submodule {
			continue
		}
		// A size is looked up when asked, not for every entry listed: a
		// tree of a quarter of a million entries is listed in
		// milliseconds, and a repository of loose objects opens no file
		// per entry.
		out = append(out, entryInfo{name: c.Name, mode: c.Mode, lazy: &lazySize{repo: t.repo, entry: c}})
	}
	sortEntries(out)
	return out, nil
}

// Stat implements fs.StatFS.
func (t *TreeFS) Stat(name string) (fs.FileInfo, error) {
	e, err := t.lookup(name)
	if err != nil {
		return nil, err
	}
	return entryInfo{name: path.Base(name), mode: e.Mode, size: t.repo.size(e)}, nil
}

// Hash implements FS.
func (t *TreeFS) Hash(name string) (string, error) {
	e, err := t.lookup(name)
	if err != nil {
		return "", err
	}
	if isDir(e.Mode) {
		return "", &fs.PathError{Op: "hash", Path: name, Err: fmt.Errorf("is a directory")}
	}
	return e.Hash.String(), nil
}

// size returns the size of a file entry's blob without reading it.
func (r *Repo) size(e object.TreeEntry) int64 {
	if isDir(e.Mode) {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sizeLocked(e)
}

// sizeLocked is size for a caller holding r.mu.
func (r *Repo) sizeLocked(e object.TreeEntry) int64 {
	if s, ok := r.git.Storer.(interface {
		EncodedObjectSize(plumbing.Hash) (int64, error)
	}); ok {
		if n, err := s.EncodedObjectSize(e.Hash); err == nil {
			return n
		}
	}
	if o, err := r.git.Storer.EncodedObject(plumbing.BlobObject, e.Hash); err == nil {
		return o.Size()
	}
	return 0
}

// entryInfo is both the fs.FileInfo and the fs.DirEntry of a tree entry.
type entryInfo struct {
	name string
	mode filemode.FileMode
	size int64
	// lazy, when set, looks the size up on first ask.
	lazy *lazySize
}

// lazySize is a tree entry's size, looked up once when asked.
type lazySize struct {
	once  sync.Once
	repo  *Repo
	entry object.TreeEntry
	size  int64
}

func (e entryInfo) Name() string { return e.name }
func (e entryInfo) Size() int64 {
	if l := e.lazy; l != nil {
		l.once.Do(func() { l.size = l.repo.size(l.entry) })
		return l.size
	}
	return e.size
}
func (e entryInfo) Mode() fs.FileMode {
	switch e.mode {
	case filemode.Dir:
		return fs.ModeDir | 0o755
	case filemode.Executable:
		return 0o755
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	}
	return 0o644
}
func (e entryInfo) ModTime() time.Time         { return time.Time{} }
func (e entryInfo) IsDir() bool                { return isDir(e.mode) }
func (e entryInfo) Sys() any                   { return nil }
func (e entryInfo) Type() fs.FileMode          { return e.Mode().Type() }
func (e entryInfo) Info() (fs.FileInfo, error) { return e, nil }

type memFile struct {
	info entryInfo
	*bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type dirFile struct {
	info    entryInfo
	entries []fs.DirEntry
	off     int
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fmt.Errorf("is a directory")}
}

func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}

// lstat finds a path's own entry: its directories' links are followed,
// a link at its end is not.
func (t *TreeFS) lstat(name string) (object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return object.TreeEntry{}, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: t.root}, nil
	}
	t.repo.mu.Lock()
	defer t.repo.mu.Unlock()
	dir, base := path.Split(name)
	parent, err := t.lookupLocked(path.Clean("./"+dir), 0)
	if err != nil {
		return object.TreeEntry{}, err
	}
	if !isDir(parent.Mode) {
		return object.TreeEntry{}, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	}
	tree, err := t.repo.tree(parent.Hash)
	if err != nil {
		return object.TreeEntry{}, err
	}
	e, err := tree.FindEntry(base)
	if err != nil {
		return object.TreeEntry{}, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
	}
	return *e, nil
}

// Lstat implements fs.ReadLinkFS: a symbolic link is reported as itself.
func (t *TreeFS) Lstat(name string) (fs.FileInfo, error) {
	e, err := t.lstat(name)
	if err != nil {
		return nil, err
	}
	return entryInfo{name: path.Base(name), mode: e.Mode, size: t.repo.size(e)}, nil
}

// ReadLink implements fs.ReadLinkFS.
func (t *TreeFS) ReadLink(name string) (string, error) {
	e, err := t.lstat(name)
	if err != nil {
		return "", err
	}
	if e.Mode != filemode.Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	target, err := t.repo.ReadBlob(e.Hash)
	if err != nil {
		return "", err
	}
	return string(target), nil
}

// validEntry reports whether a tree entry's name is one git writes: one
// path element, not "." or "..", not .git under any case.
func validEntry(name string) bool {
	switch {
	case name == "", name == ".", name == "..", strings.ContainsAny(name, "/\x00"), strings.EqualFold(name, ".git"):
		return false
	}
	return true
}
