package build

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// file is one file laid into the image. Its content is known by its git
// blob hash, which a commit's tree gives without reading it: deciding
// that an image was built before reads no file of a git source.
type file struct {
	dest string // absolute, slash-separated
	exec bool
	hash string // git blob hash of the content
	src  string // its path in fsys
	fsys source.FS
}

// read returns the file's content.
func (f file) read() ([]byte, error) { return f.fsys.ReadFile(f.src) }

// maxGlobEntries bounds the files and folders a mapping's glob walks: a
// source of millions of files (or of symbolic links that multiply them)
// is no image's.
const maxGlobEntries = 1_000_000

// collect reads the files a source's mappings name. field is the mappings'
// field path, for errors ("spec.source[0].mappings"). Nothing under .git
// is ever taken; with ignore (a working tree), a glob leaves out what
// .gitignore and .sluiceignore files do (node_modules, build caches),
// while a path named exactly is taken as asked (a binary built into an
// ignored bin/).
func collect(ctx context.Context, fsys source.FS, mappings []v1alpha1.Mapping, field string, ignore *source.Ignore) ([]file, error) {
	var out []file
	var errs []error
	for i, m := range mappings {
		where := fmt.Sprintf("%s[%d]", field, i)
		// A glob's fixed part (or a path named exactly) that is a link out
		// of the source is refused by name, not found to match nothing.
		base, _ := doublestar.SplitPattern(m.Src)
		if !strings.ContainsAny(m.Src, `*?[{\`) {
			base = m.Src
		}
		if base != "." {
			if _, err := source.Resolve(fsys, base); source.IsLinkError(err) {
				errs = append(errs, fmt.Errorf("%s.src %q: %w", where, m.Src, err))
				continue
			}
		}
		found, err := source.Glob(ctx, fsys, m.Src, source.WalkOptions{Entries: maxGlobEntries})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.src %q: %w", where, m.Src, err))
			continue
		}
		var matches []string
		for _, p := range found {
			if _, err := source.Resolve(fsys, p); source.IsLinkError(err) {
				errs = append(errs, fmt.Errorf("%s.src %q: %w", where, m.Src, err))
				continue
			}
			switch {
			case source.IsGitDir(p):
			case ignore != nil && p != m.Src && ignore.Match(p, false):
			default:
				matches = append(matches, p)
			}
		}
		if len(matches) == 0 {
			errs = append(errs, fmt.Errorf("%s.src %q matches no file in the source (none but .git or ignored ones)", where, m.Src))
			continue
		}
		sort.Strings(matches)
		single := len(matches) == 1 && matches[0] == m.Src
		for _, p := range matches {
			dest := m.Dest
			if !single {
				rel := p
				if m.Strip != "" {
					strip := strings.TrimSuffix(m.Strip, "/") + "/"
					if !strings.HasPrefix(p, strip) {
						errs = append(errs, fmt.Errorf("%s.strip %q is not a prefix of %s", where, m.Strip, p))
						continue
					}
					rel = strings.TrimPrefix(p, strip)
				}
				dest = path.Join(m.Dest, rel)
			}
			if d := path.Clean(dest); d == "/" || source.IsGitDir(d) {
				errs = append(errs, fmt.Errorf("%s: %s would be written as %s in the image: give it a file name (dest)", where, p, d))
				continue
			}
			info, err := fsys.Stat(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", where, p, err))
				continue
			}
			h, err := fsys.Hash(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", where, p, err))
				continue
			}
			out = append(out, file{dest: path.Clean(dest), exec: info.Mode()&0o111 != 0, hash: h, src: p, fsys: fsys})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Two mappings writing one path: the later wins, as a COPY would.
	sort.SliceStable(out, func(i, j int) bool { return out[i].dest < out[j].dest })
	dedup := out[:0]
	for i, f := range out {
		if i+1 < len(out) && out[i+1].dest == f.dest {
			continue
		}
		dedup = append(dedup, f)
	}
	return dedup, nil
}

// sameFiles reports whether two file sets are the same paths, modes and
// contents.
func sameFiles(a, b []file) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].dest != b[i].dest || a[i].exec != b[i].exec || a[i].hash != b[i].hash {
			return false
		}
	}
	return true
}
