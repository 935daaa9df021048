package destination

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"sluice.dev/sluice/internal/source"
)

// Dir is a local directory standing in for a branch (sluice hydrate
// --out): folders are written as plain files, nothing is committed.
type Dir struct {
	// Root is the directory.
	Root string
}

func (d Dir) abs(p string) string { return filepath.Join(d.Root, filepath.FromSlash(p)) }

// TreeHash is not known for a directory: ok is always false.
func (d Dir) TreeHash(string) (string, bool, error) { return "", false, nil }

// Hashes lists a folder's files with their git blob hashes; nil when the
// folder is absent.
func (d Dir) Hashes(folder string) (map[string]string, error) {
	f, err := d.ReadFolder(folder)
	if err != nil || f == nil {
		return nil, err
	}
	return f.Hashes(), nil
}

// ReadFile reads a file; ok is false when it is absent.
func (d Dir) ReadFile(p string) ([]byte, bool, error) {
	data, err := os.ReadFile(d.abs(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// ReadFolder reads every file of a folder; nil when it is absent.
func (d Dir) ReadFolder(folder string) (Folder, error) {
	root := d.abs(folder)
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	f := Folder{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		f[filepath.ToSlash(rel)] = data
		return nil
	})
	return f, err
}

// WriteFolder replaces a folder with the given files, through a sibling
// temporary folder renamed into place, so a failure leaves the old one.
func (d Dir) WriteFolder(folder string, f Folder) error {
	dst := d.abs(folder)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".sluice-"+filepath.Base(dst)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, data := range f {
		p, err := source.SecureJoin(tmp, name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	old := tmp + ".old"
	if err := os.Rename(dst, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Rename(old, dst)
		return err
	}
	return os.RemoveAll(old)
}
