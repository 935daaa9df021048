package source

import (
	"fmt"
	"path/filepath"
	"strings"
)

// SecureJoin joins a slash-separated relative name to root, refusing names
// that would land outside it.
func SecureJoin(root, name string) (string, error) {
	p := filepath.Join(root, filepath.FromSlash(name))
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(name) {
		return "", fmt.Errorf("%q leaves %s", name, root)
	}
	return p, nil
}
