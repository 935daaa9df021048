package source

import (
	"io/fs"
)

// FS is a read-only source tree: an io/fs file system whose files also
// have git object hashes, whether it is a commit's tree or a working
// directory, so that what a render read can be compared across both. Its
// symbolic links can be read (fs.ReadLinkFS), so that a renderer can
// follow them itself and tell where a path really leads (Resolve).
type FS interface {
	fs.ReadFileFS
	fs.ReadDirFS
	fs.StatFS
	fs.ReadLinkFS
	// Hash returns the git blob hash of a file.
	Hash(name string) (string, error)
}
