package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/bmatcuk/doublestar/v4"
)

// WalkOptions bound a walk.
type WalkOptions struct {
	// Entries bounds the directory entries listed in all; 0 sets no bound
	// of the walk's own (a render's tree counts its listings itself).
	Entries int
	// Flag raises Entries, named in its error.
	Flag string
}

// EntriesError is a walk past its bound of entries.
type EntriesError struct {
	Root string
	Max  int
	Flag string
}

func (e *EntriesError) Error() string {
	msg := fmt.Sprintf("%s holds more than %d files and folders: over the limit", e.Root, e.Max)
	if e.Flag != "" {
		msg += "; raise it with " + e.Flag + " if this is expected"
	}
	return msg
}

// Walk walks the tree under root as fs.WalkDir does, in lexical order,
// with these differences: a symbolic link to a folder is followed only
// where it does not lead back to a folder the walk is inside (loop/a
// pointing at "." is a *LinkError naming the link: a cycle would make the
// walk endless, three such links exponential); ctx is checked at every
// folder; and past o.Entries entries the walk stops with an
// *EntriesError.
func Walk(ctx context.Context, fsys FS, root string, o WalkOptions, fn fs.WalkDirFunc) error {
	info, err := fsys.Stat(root)
	if err != nil {
		return fn(root, nil, err)
	}
	real := root
	if r, err := Resolve(fsys, root); err == nil {
		real = r.Path
	}
	w := &walker{ctx: ctx, fsys: fsys, o: o, root: root, fn: fn}
	err = w.walk(root, real, fs.FileInfoToDirEntry(info), nil)
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

type walker struct {
	ctx     context.Context
	fsys    FS
	o       WalkOptions
	root    string
	fn      fs.WalkDirFunc
	entries int
}

// walk visits p (whose links resolved lead to real), and, for a folder,
// what it holds; inside lists the real paths of the folders above it.
func (w *walker) walk(p, real string, d fs.DirEntry, inside []string) error {
	if err := w.fn(p, d, nil); err != nil || !d.IsDir() {
		return err
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	entries, err := w.fsys.ReadDir(p)
	if err != nil {
		if err := w.fn(p, d, err); err != nil && !errors.Is(err, fs.SkipDir) {
			return err
		}
		return nil
	}
	w.entries += len(entries)
	if w.o.Entries > 0 && w.entries > w.o.Entries {
		return &EntriesError{Root: w.root, Max: w.o.Entries, Flag: w.o.Flag}
	}
	inside = append(inside, real)
	for _, e := range entries {
		child := path.Join(p, e.Name())
		childReal := path.Join(real, e.Name())
		if e.IsDir() {
			// A folder reached through a link is where the link leads.
			if info, err := w.fsys.Lstat(child); err == nil && info.Mode()&fs.ModeSymlink != 0 {
				r, err := Resolve(w.fsys, child)
				if err != nil {
					if err := w.fn(child, e, err); err != nil && !errors.Is(err, fs.SkipDir) {
						return err
					}
					continue
				}
				childReal = r.Path
				for _, a := range inside {
					if Within(a, childReal) {
						return &LinkError{Name: child, Link: r.Link, Target: r.Target, Msg: fmt.Sprintf("leads back to %s, a folder that holds it: a cycle", a)}
					}
				}
			}
		}
		if err := w.walk(child, childReal, e, inside); err != nil {
			if errors.Is(err, fs.SkipDir) && e.IsDir() {
				continue
			}
			if errors.Is(err, fs.SkipDir) {
				return nil // SkipDir from a file skips the rest of its folder
			}
			return err
		}
	}
	return nil
}

// Glob returns the files of fsys that a doublestar pattern matches,
// sorted, walking (as Walk does) only the folder the pattern's fixed
// part names: cycles refused, ctx checked, entries bounded.
func Glob(ctx context.Context, fsys FS, pattern string, o WalkOptions) ([]string, error) {
	base, _ := doublestar.SplitPattern(pattern)
	if _, err := fsys.Stat(base); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []string
	err := Walk(ctx, fsys, base, o, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if IsLinkError(err) {
				return err
			}
			return nil // unreadable or dangling: not a match
		}
		if !d.IsDir() {
			if ok, _ := doublestar.Match(pattern, p); ok {
				out = append(out, p)
			}
		}
		return nil
	})
	return out, err
}
