package session

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"sluice.dev/sluice/internal/source"
)

// Change is a burst of file events, debounced.
type Change struct {
	// Paths are the changed paths, relative to the watcher's root.
	Paths []string
	// First is when the burst's first event arrived.
	First time.Time
}

// Watcher watches directories recursively and reports bursts of changes,
// leaving out what .gitignore and .sluiceignore files (and .git) exclude.
type Watcher struct {
	root   string
	fw     *fsnotify.Watcher
	quiet  time.Duration
	max    time.Duration
	out    chan Change
	errs   chan error
	mu     sync.Mutex
	dirs   map[string]bool
	ignore *source.Ignore
	done   chan struct{}
	// gitDir is the git directory of the repository holding root ("" if
	// none): while git holds its index or HEAD locked, a checkout, merge
	// or stash is rewriting the tree, and a burst is held until it ends.
	gitDir string
}

// gitHold is how long a burst is held for git's locks at most: a lock a
// crashed git left behind does not stop the session.
const gitHold = 10 * time.Second

// NewWatcher watches paths under root. A burst ends once quiet passes
// without events, or max after it began.
func NewWatcher(root string, quiet, max time.Duration) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		root: filepath.Clean(root), fw: fw, quiet: quiet, max: max,
		out: make(chan Change), errs: make(chan error, 1), dirs: map[string]bool{},
		ignore: source.NewIgnore(os.DirFS(root)), done: make(chan struct{}),
	}
	if h, err := source.LocalHead(root); err == nil {
		w.gitDir = h.GitDir
	}
	go w.loop()
	return w, nil
}

// Changes delivers each burst.
func (w *Watcher) Changes() <-chan Change { return w.out }

// Errors delivers a failure of the watcher itself.
func (w *Watcher) Errors() <-chan error { return w.errs }

// Close stops watching.
func (w *Watcher) Close() error {
	close(w.done)
	return w.fw.Close()
}

// Add watches dir and, recursively, every directory under it that is not
// ignored. Directories already watched cost nothing.
func (w *Watcher) Add(dir string) error {
	dir = filepath.Clean(dir)
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != dir && w.ignored(p, true) {
			return filepath.SkipDir
		}
		return w.addOne(p)
	})
}

// AddOne watches one directory, not its subdirectories.
func (w *Watcher) AddOne(dir string) error {
	dir = filepath.Clean(dir)
	if w.ignored(dir, true) {
		return nil
	}
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return w.addOne(dir)
}

func (w *Watcher) addOne(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dirs[dir] {
		return nil
	}
	if err := w.fw.Add(dir); err != nil {
		return err
	}
	w.dirs[dir] = true
	return nil
}

// ignored reports whether the path (absolute) is excluded: .git, or a
// pattern of an ignore file above it.
func (w *Watcher) ignored(p string, isDir bool) bool {
	rel, err := filepath.Rel(w.root, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	return w.ignore.Match(filepath.ToSlash(rel), isDir)
}

func (w *Watcher) loop() {
	var pending []string
	var first time.Time
	var timer <-chan time.Time
	for {
		select {
		case <-w.done:
			return
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			select {
			case w.errs <- err:
			default:
			}
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			isDir := false
			if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
				isDir = true
			}
			if w.ignored(ev.Name, isDir) {
				continue
			}
			if base := filepath.Base(ev.Name); ev.Has(fsnotify.Write) || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) {
				for _, f := range source.IgnoreFiles {
					if rel, err := filepath.Rel(w.root, filepath.Dir(ev.Name)); err == nil && base == f {
						w.ignore.Forget(filepath.ToSlash(rel))
					}
				}
			}
			if isDir && ev.Has(fsnotify.Create) {
				w.Add(ev.Name) // a new directory (a branch switch, mkdir -p)
			}
			now := time.Now()
			if len(pending) == 0 {
				first = now
			}
			if rel, err := filepath.Rel(w.root, ev.Name); err == nil {
				pending = append(pending, filepath.ToSlash(rel))
			}
			wait := w.quiet
			if left := w.max - now.Sub(first); left < wait {
				wait = max(left, 0)
			}
			timer = time.After(wait)
		case <-timer:
			timer = nil
			if len(pending) == 0 {
				continue
			}
			if w.gitBusy() && time.Since(first) < gitHold {
				// A branch switch spans more than a burst's longest on a
				// loaded machine: half a tree would render.
				timer = time.After(w.quiet)
				continue
			}
			c := Change{Paths: dedupe(pending), First: first}
			pending = nil
			select {
			case w.out <- c:
			case <-w.done:
				return
			}
		}
	}
}

// gitBusy reports whether git holds the repository's index or HEAD locked.
func (w *Watcher) gitBusy() bool {
	if w.gitDir == "" {
		return false
	}
	for _, lock := range []string{"index.lock", "HEAD.lock"} {
		if _, err := os.Lstat(filepath.Join(w.gitDir, lock)); err == nil {
			return true
		}
	}
	return false
}

func dedupe(ps []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
