package source

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
)

// DirFS is the file system of a local directory as it is on disk, with
// uncommitted changes. It cannot be left: paths and symbolic links that
// point outside it fail, as os.Root guarantees.
type DirFS struct {
	root *os.Root
	fsys fs.FS
	dir  string
}

// Dir opens a directory as a source tree.
func Dir(path string) (*DirFS, error) {
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return &DirFS{root: root, fsys: root.FS(), dir: path}, nil
}

// Path is the directory on disk.
func (d *DirFS) Path() string { return d.dir }

// Close releases the directory.
func (d *DirFS) Close() error { return d.root.Close() }

// Open implements fs.FS.
func (d *DirFS) Open(name string) (fs.File, error) { return d.fsys.Open(name) }

// ReadFile implements fs.ReadFileFS.
func (d *DirFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(d.fsys, name) }

// ReadDir implements fs.ReadDirFS.
func (d *DirFS) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(d.fsys, name)
	if err != nil {
		return nil, err
	}
	out := entries[:0]
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			// Report a link as what it points to, as TreeFS does.
			p := path.Join(name, e.Name())
			info, err := fs.Stat(d.fsys, p)
			if err != nil {
				if _, lerr := Resolve(d, p); IsLinkError(lerr) {
					out = append(out, e) // out of the tree: listed as the link it is
				}
				continue
			}
			e = fs.FileInfoToDirEntry(info)
		}
		out = append(out, e)
	}
	return out, nil
}

// Lstat implements fs.ReadLinkFS.
func (d *DirFS) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(d.fsys, name) }

// ReadLink implements fs.ReadLinkFS.
func (d *DirFS) ReadLink(name string) (string, error) { return fs.ReadLink(d.fsys, name) }

// Stat implements fs.StatFS.
func (d *DirFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(d.fsys, name) }

// Hash implements FS: the git blob hash of the file's content, read as a
// stream (a file only looked at is not held in memory).
func (d *DirFS) Hash(name string) (string, error) {
	f, err := d.fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if info.IsDir() {
		return "", &fs.PathError{Op: "hash", Path: name, Err: fmt.Errorf("is a directory")}
	}
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", info.Size())
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	if n != info.Size() {
		return "", &fs.PathError{Op: "hash", Path: name, Err: fmt.Errorf("changed while it was read")}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sortEntries(e []fs.DirEntry) {
	sort.Slice(e, func(i, j int) bool { return e[i].Name() < e[j].Name() })
}
