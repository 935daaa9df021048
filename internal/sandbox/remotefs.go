package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"path"
	"sync"
	"time"

	"sluice.dev/sluice/internal/source"
)

// remoteFS is a tree of the host as a worker reads it: every call asks
// the host, which keeps the tree, bounds what is read and records it
// (tracked: what the render reads; not tracked: what it only looks at,
// as its size or where a link leads). A render's tree does not change
// while it runs: answers other than files' contents are kept.
type remoteFS struct {
	c       *conn
	id      uint64
	tracked bool
	cache   *fsCache
}

// fsCache keeps a tree's answers, per view.
type fsCache struct {
	mu    sync.Mutex
	calls map[cacheKey]cached
}

type cacheKey struct {
	k       kind
	tracked bool
	path    string
}

type cached struct {
	data []byte
	err  error
}

var _ source.FS = (*remoteFS)(nil)

// ask makes a call, or answers it from the cache.
func (r *remoteFS) ask(k kind, name string, keep bool) ([]byte, error) {
	key := cacheKey{k, r.tracked, name}
	if keep {
		r.cache.mu.Lock()
		if c, ok := r.cache.calls[key]; ok {
			r.cache.mu.Unlock()
			return c.data, c.err
		}
		r.cache.mu.Unlock()
	}
	data, err := r.c.call(k, fsCall{fs: r.id, tracked: r.tracked, path: name}.encode())
	if keep {
		r.cache.mu.Lock()
		if r.cache.calls == nil {
			r.cache.calls = map[cacheKey]cached{}
		}
		r.cache.calls[key] = cached{data, err}
		r.cache.mu.Unlock()
	}
	return data, err
}

func (r *remoteFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	return r.ask(kindReadFile, name, false)
}

func (r *remoteFS) Stat(name string) (fs.FileInfo, error) {
	data, err := r.ask(kindStat, name, true)
	if err != nil {
		return nil, err
	}
	return decodeInfo(data, path.Base(name))
}

func (r *remoteFS) Lstat(name string) (fs.FileInfo, error) {
	data, err := r.ask(kindLstat, name, true)
	if err != nil {
		return nil, err
	}
	return decodeInfo(data, path.Base(name))
}

func (r *remoteFS) ReadLink(name string) (string, error) {
	data, err := r.ask(kindReadLink, name, true)
	return string(data), err
}

func (r *remoteFS) Hash(name string) (string, error) {
	data, err := r.ask(kindHash, name, true)
	return string(data), err
}

func (r *remoteFS) ReadDir(name string) ([]fs.DirEntry, error) {
	data, err := r.ask(kindReadDir, name, true)
	if err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(data)
	if k <= 0 {
		return nil, errMalformed
	}
	data = data[k:]
	out := make([]fs.DirEntry, 0, min(n, 1<<16))
	for range n {
		mode, k := binary.Uvarint(data)
		if k <= 0 {
			return nil, errMalformed
		}
		data = data[k:]
		l, k := binary.Uvarint(data)
		if k <= 0 || uint64(len(data)-k) < l {
			return nil, errMalformed
		}
		entry := string(data[k : k+int(l)])
		data = data[k+int(l):]
		// The entry's size is asked for when wanted, of the untracked
		// view: looking at it is not reading it.
		raw := &remoteFS{c: r.c, id: r.id, cache: r.cache}
		out = append(out, &remoteEntry{name: entry, mode: fs.FileMode(mode), stat: func() (fs.FileInfo, error) { return raw.Stat(path.Join(name, entry)) }})
	}
	return out, nil
}

func (r *remoteFS) Open(name string) (fs.File, error) {
	info, err := r.Stat(name)
	if err != nil {
		return nil, err
	}
	if info.IsDir() {
		entries, err := r.ReadDir(name)
		if err != nil {
			return nil, err
		}
		return &remoteDir{info: info, entries: entries}, nil
	}
	data, err := r.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return &remoteFile{info: info, Reader: bytes.NewReader(data)}, nil
}

var errMalformed = errors.New("a malformed answer from the host")

// encodeInfo is a file's mode and size as a stat answer carries them.
func encodeInfo(info fs.FileInfo) []byte {
	b := binary.AppendUvarint(nil, uint64(info.Mode()))
	return binary.AppendVarint(b, info.Size())
}

func decodeInfo(data []byte, name string) (fs.FileInfo, error) {
	mode, k := binary.Uvarint(data)
	if k <= 0 {
		return nil, errMalformed
	}
	size, j := binary.Varint(data[k:])
	if j <= 0 {
		return nil, errMalformed
	}
	return fileInfo{name: name, mode: fs.FileMode(mode), size: size}, nil
}

type fileInfo struct {
	name string
	mode fs.FileMode
	size int64
}

func (f fileInfo) Name() string       { return f.name }
func (f fileInfo) Size() int64        { return f.size }
func (f fileInfo) Mode() fs.FileMode  { return f.mode }
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fileInfo) Sys() any           { return nil }

type remoteEntry struct {
	name string
	mode fs.FileMode
	stat func() (fs.FileInfo, error)
}

func (e *remoteEntry) Name() string               { return e.name }
func (e *remoteEntry) IsDir() bool                { return e.mode.IsDir() }
func (e *remoteEntry) Type() fs.FileMode          { return e.mode.Type() }
func (e *remoteEntry) Info() (fs.FileInfo, error) { return e.stat() }

type remoteFile struct {
	info fs.FileInfo
	*bytes.Reader
}

func (f *remoteFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *remoteFile) Close() error               { return nil }

type remoteDir struct {
	info    fs.FileInfo
	entries []fs.DirEntry
	off     int
}

func (d *remoteDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *remoteDir) Close() error               { return nil }
func (d *remoteDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.Name(), Err: errors.New("is a directory")}
}

func (d *remoteDir) ReadDir(n int) ([]fs.DirEntry, error) {
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
