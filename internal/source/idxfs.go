package source

import (
	"bytes"
	"errors"
	"os"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/util"
)

// indexFS is a clone's filesystem, its pack indexes read whole, in one
// read. go-git decodes an index four bytes at a time (its fanout table
// alone is 256 reads), a system call each; a controller whose clones
// outnumber maxOpenClones loads the indexes of most of them again every
// interval.
type indexFS struct {
	billy.Filesystem
}

func (fs indexFS) Open(name string) (billy.File, error) {
	if !strings.HasSuffix(name, ".idx") {
		return fs.Filesystem.Open(name)
	}
	data, err := util.ReadFile(fs.Filesystem, name)
	if err != nil {
		return nil, err
	}
	return &indexFile{name: name, Reader: bytes.NewReader(data)}, nil
}

// Chmod is the filesystem's own: go-git makes the packs it writes
// read-only through it.
func (fs indexFS) Chmod(name string, mode os.FileMode) error {
	if c, ok := fs.Filesystem.(billy.Chmod); ok {
		return c.Chmod(name, mode)
	}
	return nil
}

// indexFile is a pack index read into memory.
type indexFile struct {
	name string
	*bytes.Reader
}

var errIndexReadOnly = errors.New("a pack index is read-only")

func (f *indexFile) Name() string              { return f.name }
func (f *indexFile) Write([]byte) (int, error) { return 0, errIndexReadOnly }
func (f *indexFile) Truncate(int64) error      { return errIndexReadOnly }
func (f *indexFile) Close() error              { return nil }
func (f *indexFile) Lock() error               { return nil }
func (f *indexFile) Unlock() error             { return nil }
