package render

import (
	"testing/fstest"

	"sluice.dev/sluice/internal/source"
)

// mapFS is an in-memory source tree for tests: path → content.
type mapFS map[string]string

func (m mapFS) fs() source.FS {
	f := fstest.MapFS{}
	for k, v := range m {
		f[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return hashed{f}
}

type hashed struct{ fstest.MapFS }

func (h hashed) Hash(name string) (string, error) {
	data, err := h.MapFS.ReadFile(name)
	if err != nil {
		return "", err
	}
	return source.BlobHash(data), nil
}
