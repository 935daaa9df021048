package source

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"sluice.dev/sluice/api/v1alpha1"
)

// Input hashes for what is not a file.
const (
	hashAbsent = "none"
	hashDir    = "tree"
	// hashLink prefixes a symbolic link's target: a link followed is an
	// input of its own, since pointing it elsewhere changes the render
	// while neither file it names changes.
	hashLink = "link:"
)

// Tracker is an FS that records every path read through it, with the hash
// that decides whether a later tree would give the same render: a file's
// blob hash, a listed directory's names, a tested path's absence.
type Tracker struct {
	FS
	mu     sync.Mutex
	inputs map[string]string
}

// Track wraps fsys to record what is read through it.
func Track(fsys FS) *Tracker { return &Tracker{FS: fsys, inputs: map[string]string{}} }

func (t *Tracker) record(name, hash string) {
	name = path.Clean(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	// A listing says more than a mere test of the same directory.
	if prev, ok := t.inputs[name]; ok && prev != hashDir && hash == hashDir {
		return
	}
	t.inputs[name] = hash
}

func (t *Tracker) recordErr(name string, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		t.record(name, hashAbsent)
	}
}

// Open implements fs.FS.
func (t *Tracker) Open(name string) (fs.File, error) {
	f, err := t.FS.Open(name)
	if err != nil {
		t.recordErr(name, err)
		return nil, err
	}
	if info, err := f.Stat(); err == nil && info.IsDir() {
		t.record(name, hashDir)
	} else {
		t.recordFile(name)
	}
	return f, nil
}

// ReadFile implements fs.ReadFileFS.
func (t *Tracker) ReadFile(name string) ([]byte, error) {
	data, err := t.FS.ReadFile(name)
	if err != nil {
		t.recordErr(name, err)
		return nil, err
	}
	if _, ok := t.FS.(*DirFS); ok {
		// A working tree's Hash reads the file again: hash what was read.
		t.record(name, BlobHash(data))
		return data, nil
	}
	t.recordFile(name)
	return data, nil
}

// ReadDir implements fs.ReadDirFS.
func (t *Tracker) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := t.FS.ReadDir(name)
	if err != nil {
		t.recordErr(name, err)
		return nil, err
	}
	t.record(name, listingHash(entries))
	return entries, nil
}

// Stat implements fs.StatFS.
func (t *Tracker) Stat(name string) (fs.FileInfo, error) {
	info, err := t.FS.Stat(name)
	if err != nil {
		t.recordErr(name, err)
		return nil, err
	}
	if info.IsDir() {
		t.record(name, hashDir)
	} else {
		t.recordFile(name)
	}
	return info, nil
}

// Lstat implements fs.ReadLinkFS.
func (t *Tracker) Lstat(name string) (fs.FileInfo, error) {
	info, err := t.FS.Lstat(name)
	if err != nil {
		t.recordErr(name, err)
		return nil, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		if target, err := t.FS.ReadLink(name); err == nil {
			t.record(name, hashLink+target)
		}
	case info.IsDir():
		t.record(name, hashDir)
	default:
		t.recordFile(name)
	}
	return info, nil
}

// ReadLink implements fs.ReadLinkFS.
func (t *Tracker) ReadLink(name string) (string, error) {
	target, err := t.FS.ReadLink(name)
	if err != nil {
		t.recordErr(name, err)
		return "", err
	}
	t.record(name, hashLink+target)
	return target, nil
}

func (t *Tracker) recordFile(name string) {
	if h, err := t.FS.Hash(name); err == nil {
		t.record(name, h)
	}
}

// Inputs returns what was read, sorted by path.
func (t *Tracker) Inputs() []v1alpha1.Input {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]v1alpha1.Input, 0, len(t.inputs))
	for p, h := range t.inputs {
		out = append(out, v1alpha1.Input{Path: p, Hash: h})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// listingHash names a directory's entries: their names and whether each is
// a directory, not their content.
func listingHash(entries []fs.DirEntry) string {
	h := sha1.New()
	for _, e := range entries {
		kind := "f"
		if e.IsDir() {
			kind = "d"
		}
		h.Write([]byte(kind + e.Name() + "\x00"))
	}
	return hashDir + ":" + hex.EncodeToString(h.Sum(nil))
}

// Current returns the hash an input has in fsys now, as a Tracker would
// record it.
func Current(fsys FS, in v1alpha1.Input) string {
	switch {
	case in.Hash == hashAbsent:
		if _, err := fsys.Stat(in.Path); errors.Is(err, fs.ErrNotExist) {
			return hashAbsent
		}
		return "present"
	case in.Hash == hashDir:
		info, err := fsys.Stat(in.Path)
		if err != nil || !info.IsDir() {
			return "changed"
		}
		return hashDir
	case strings.HasPrefix(in.Hash, hashLink):
		target, err := fsys.ReadLink(in.Path)
		if err != nil {
			return "changed"
		}
		return hashLink + target
	case len(in.Hash) > len(hashDir) && in.Hash[:len(hashDir)+1] == hashDir+":":
		entries, err := fsys.ReadDir(in.Path)
		if err != nil {
			return "changed"
		}
		return listingHash(entries)
	}
	h, err := fsys.Hash(in.Path)
	if err != nil {
		return "changed"
	}
	return h
}

// Unchanged reports whether every input has the same hash in fsys as when
// it was recorded: a render of fsys would read the same bytes. Where fsys
// is a git tree and trees records the tree hashes of the inputs' folders,
// a folder whose hash is unchanged vouches for all its inputs without
// being read, so a commit elsewhere costs one look-up per folder.
func Unchanged(fsys FS, inputs, trees []v1alpha1.Input) bool {
	th, _ := fsys.(interface{ TreeHash(string) (string, error) })
	recorded := map[string]string{}
	if th != nil {
		for _, t := range trees {
			recorded[t.Path] = t.Hash
		}
	}
	same := map[string]bool{}
	for _, in := range inputs {
		if dir := path.Dir(in.Path); th != nil && recorded[dir] != "" {
			ok, seen := same[dir]
			if !seen {
				h, err := th.TreeHash(dir)
				ok = err == nil && h == recorded[dir]
				same[dir] = ok
			}
			if ok {
				continue
			}
		}
		if Current(fsys, in) != in.Hash {
			return false
		}
	}
	return true
}

// Trees returns the git tree hashes of the folders holding the inputs,
// for Unchanged; nil when fsys is not a git tree.
func Trees(fsys FS, inputs []v1alpha1.Input) []v1alpha1.Input {
	th, ok := fsys.(interface{ TreeHash(string) (string, error) })
	if !ok {
		return nil
	}
	direct, _ := fsys.(interface{ Direct(string) bool })
	seen := map[string]bool{}
	linked := map[string]bool{}
	for _, in := range inputs {
		if direct != nil && !direct.Direct(in.Path) {
			linked[path.Dir(in.Path)] = true
		}
	}
	var out []v1alpha1.Input
	for _, in := range inputs {
		dir := path.Dir(in.Path)
		if seen[dir] || linked[dir] {
			continue
		}
		seen[dir] = true
		if h, err := th.TreeHash(dir); err == nil {
			out = append(out, v1alpha1.Input{Path: dir, Hash: h})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Differ reports whether a render of b would read other bytes than a
// render of a, for the inputs a render recorded: what a change from a to
// b reaches. Where both are git trees, a folder of the same tree hash in
// both vouches for the inputs it holds without their being read.
func Differ(a, b FS, inputs []v1alpha1.Input) bool {
	ta, _ := a.(interface{ TreeHash(string) (string, error) })
	tb, _ := b.(interface{ TreeHash(string) (string, error) })
	same := map[string]bool{}
	for _, in := range inputs {
		if dir := path.Dir(in.Path); ta != nil && tb != nil {
			ok, seen := same[dir]
			if !seen {
				ha, erra := ta.TreeHash(dir)
				hb, errb := tb.TreeHash(dir)
				ok = erra == nil && errb == nil && ha == hb
				same[dir] = ok
			}
			if ok {
				continue
			}
		}
		if Current(a, in) != Current(b, in) {
			return true
		}
	}
	return false
}
