package session

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
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
	ignore map[string][]gitignore.Pattern // by directory: the patterns its ignore files hold
	done   chan struct{}
}

// ignoreFiles are read in every directory, as git reads .gitignore.
var ignoreFiles = []string{".gitignore", ".sluiceignore"}

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
		ignore: map[string][]gitignore.Pattern{}, done: make(chan struct{}),
	}
	if data, err := os.ReadFile(filepath.Join(root, ".git", "info", "exclude")); err == nil {
		w.ignore[filepath.Join(root, ".git", "info")] = parseIgnore(string(data), nil)
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
	w.loadIgnore(dir)
	return nil
}

// loadIgnore reads the ignore files of dir and of its parents up to the
// root (once each).
func (w *Watcher) loadIgnore(dir string) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, seen := w.ignore[d]; !seen {
			var ps []gitignore.Pattern
			for _, name := range ignoreFiles {
				if data, err := os.ReadFile(filepath.Join(d, name)); err == nil {
					ps = append(ps, parseIgnore(string(data), w.domain(d))...)
				}
			}
			w.ignore[d] = ps
		}
		if d == w.root || !strings.HasPrefix(d, w.root+string(filepath.Separator)) {
			return
		}
	}
}

func (w *Watcher) domain(dir string) []string {
	rel, err := filepath.Rel(w.root, dir)
	if err != nil || rel == "." {
		return nil
	}
	return strings.Split(filepath.ToSlash(rel), "/")
}

func parseIgnore(text string, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// ignored reports whether the path (absolute) is excluded: .git, or a
// pattern of an ignore file above it, deeper files deciding last.
func (w *Watcher) ignored(p string, isDir bool) bool {
	rel, err := filepath.Rel(w.root, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for _, part := range parts {
		if part == ".git" {
			return true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var ps []gitignore.Pattern
	ps = append(ps, w.ignore[filepath.Join(w.root, ".git", "info")]...)
	for d, i := w.root, 0; ; i++ {
		ps = append(ps, w.ignore[d]...)
		if i >= len(parts)-1 {
			break
		}
		d = filepath.Join(d, parts[i])
	}
	return gitignore.NewMatcher(ps).Match(parts, isDir)
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
			if base := filepath.Base(ev.Name); ev.Has(fsnotify.Write) || ev.Has(fsnotify.Create) {
				for _, f := range ignoreFiles {
					if base == f {
						w.mu.Lock()
						delete(w.ignore, filepath.Dir(ev.Name))
						w.loadIgnore(filepath.Dir(ev.Name))
						w.mu.Unlock()
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
