package source

import (
	"bufio"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// IgnoreFiles are read in every directory of a working tree, as git reads
// .gitignore: Sluice's own .sluiceignore adds to it.
var IgnoreFiles = []string{".gitignore", ".sluiceignore"}

// Ignore says which paths of a working tree are left out, as git leaves
// them out: .git itself, and what .gitignore files (and .sluiceignore
// files, and .git/info/exclude) exclude, each file applying to its
// directory and below, deeper files deciding last. It reads the ignore
// files of a directory once, when a path under it is first asked about.
type Ignore struct {
	fsys fs.FS
	mu   sync.Mutex
	dirs map[string][]gitignore.Pattern
	base []gitignore.Pattern
}

// NewIgnore reads the ignore files of a working tree through fsys (rooted
// at the tree's top).
func NewIgnore(fsys fs.FS) *Ignore {
	i := &Ignore{fsys: fsys, dirs: map[string][]gitignore.Pattern{}}
	if data, err := fs.ReadFile(fsys, ".git/info/exclude"); err == nil {
		i.base = parseIgnore(string(data), nil)
	}
	return i
}

// IsGitDir reports whether a path is, or is inside, a .git directory
// (compared as Windows and macOS file systems compare it).
func IsGitDir(name string) bool {
	for _, part := range strings.Split(name, "/") {
		if strings.EqualFold(part, ".git") {
			return true
		}
	}
	return false
}

// Match reports whether the slash-separated path, relative to the tree's
// top, is left out.
func (i *Ignore) Match(name string, isDir bool) bool {
	name = path.Clean(name)
	if name == "." {
		return false
	}
	if IsGitDir(name) {
		return true
	}
	parts := strings.Split(name, "/")
	ps := append([]gitignore.Pattern(nil), i.base...)
	dir := "."
	for k := 0; k < len(parts); k++ {
		ps = append(ps, i.patterns(dir)...)
		dir = path.Join(dir, parts[k])
	}
	return gitignore.NewMatcher(ps).Match(parts, isDir)
}

// Forget drops what was read of a directory's ignore files, after they
// changed.
func (i *Ignore) Forget(dir string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	delete(i.dirs, path.Clean(dir))
}

func (i *Ignore) patterns(dir string) []gitignore.Pattern {
	i.mu.Lock()
	defer i.mu.Unlock()
	if ps, ok := i.dirs[dir]; ok {
		return ps
	}
	var domain []string
	if dir != "." {
		domain = strings.Split(dir, "/")
	}
	var ps []gitignore.Pattern
	for _, name := range IgnoreFiles {
		if data, err := fs.ReadFile(i.fsys, path.Join(dir, name)); err == nil {
			ps = append(ps, parseIgnore(string(data), domain)...)
		}
	}
	i.dirs[dir] = ps
	return ps
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
