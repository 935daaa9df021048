package source

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// maxLinks is how many symbolic links one path may pass through, as on
// Linux.
const maxLinks = 40

// Resolved is a path with its symbolic links followed.
type Resolved struct {
	// Path is where the name leads, with no link left in it.
	Path string
	// Link is the first symbolic link met on the way ("" when there was
	// none), and Target what it points to, as written in the link.
	Link   string
	Target string
}

// Linked reports whether a link was followed.
func (r Resolved) Linked() bool { return r.Link != "" }

// Within reports whether the resolved path is dir or inside it.
func (r Resolved) Within(dir string) bool { return Within(r.Path, dir) }

// Within reports whether the slash-separated path p is dir or inside it
// ("." holds everything).
func Within(p, dir string) bool {
	dir = path.Clean(dir)
	p = path.Clean(p)
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

// LinkError is a symbolic link that leads out of the tree, or through too
// many links.
type LinkError struct {
	Name   string // the path resolved
	Link   string // the link that leaves
	Target string // what it points to
	Msg    string
}

func (e *LinkError) Error() string {
	if e.Link == e.Name {
		return fmt.Sprintf("%s is a symbolic link to %q, which %s", e.Name, e.Target, e.Msg)
	}
	return fmt.Sprintf("%s: symbolic link %s points to %q, which %s", e.Name, e.Link, e.Target, e.Msg)
}

// IsLinkError reports whether err is (or wraps) a *LinkError.
func IsLinkError(err error) bool {
	var le *LinkError
	return errors.As(err, &le)
}

// Resolve follows every symbolic link of name in fsys, itself, one path
// element at a time, so that the result names the file or directory name
// leads to. A link to an absolute path, or one that climbs above the
// tree's root, is a *LinkError: nothing outside the tree is ever named.
func Resolve(fsys fs.ReadLinkFS, name string) (Resolved, error) {
	var res Resolved
	if !fs.ValidPath(name) {
		return res, &fs.PathError{Op: "resolve", Path: name, Err: fs.ErrInvalid}
	}
	todo := strings.Split(name, "/")
	var done []string
	hops := 0
	last, lastTarget := "", "" // the link whose target is being followed
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return res, &LinkError{Name: name, Link: last, Target: lastTarget, Msg: "leaves the source tree"}
			}
			done = done[:len(done)-1]
			continue
		}
		p := path.Join(append(done, part)...)
		info, err := fsys.Lstat(p)
		if err != nil {
			return res, err
		}
		if info.Mode()&fs.ModeSymlink == 0 {
			done = append(done, part)
			continue
		}
		target, err := fsys.ReadLink(p)
		if err != nil {
			return res, err
		}
		if res.Link == "" {
			res.Link, res.Target = p, target
		}
		last, lastTarget = p, target
		if hops++; hops > maxLinks {
			return res, &LinkError{Name: name, Link: p, Target: target, Msg: "passes through too many symbolic links"}
		}
		if path.IsAbs(target) || strings.HasPrefix(target, `\`) {
			return res, &LinkError{Name: name, Link: p, Target: target, Msg: "is an absolute path, outside the source tree"}
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	res.Path = path.Join(done...)
	if res.Path == "" {
		res.Path = "."
	}
	return res, nil
}
