package build

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"sluice.dev/sluice/internal/source"
)

// epoch is the time every entry, and the image, carries: the same inputs
// give the same bytes.
var epoch = time.Unix(0, 0).UTC()

// layerTar writes the files as a tar archive that depends on nothing but
// them: entries sorted, parent directories included, owner root, mode
// 0755 or 0644, every timestamp the epoch.
func layerTar(files []file) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.dest); d != "/" && d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	type entry struct {
		name string
		f    *file
	}
	var entries []entry
	for d := range dirs {
		entries = append(entries, entry{name: strings.TrimPrefix(d, "/") + "/"})
	}
	for i := range files {
		entries = append(entries, entry{name: strings.TrimPrefix(files[i].dest, "/"), f: &files[i]})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: epoch}
		var data []byte
		if e.f == nil {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			var err error
			if data, err = e.f.read(); err != nil {
				return nil, err
			}
			if source.BlobHash(data) != e.f.hash {
				return nil, fmt.Errorf("%s changed while the image was built", e.f.src)
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, int64(len(data))
			if e.f.exec {
				h.Mode = 0o755
			}
		}
		tw.WriteHeader(h)
		tw.Write(data)
	}
	tw.Close()
	return buf.Bytes(), nil
}

// layer makes the files a gzip-compressed layer of the media type the base
// uses.
// The layer is made once per build, however many platforms share it;
// its compressed bytes are kept, so digesting and uploading compress once.
func layer(files []file, mt types.MediaType) (v1.Layer, error) {
	data, err := layerTar(files)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(mt), tarball.WithCompressedCaching)
}
