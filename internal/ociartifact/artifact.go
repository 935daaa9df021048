// Package ociartifact packs hydrated folders into the OCI artifacts Flux's
// source-controller (OCIRepository) and Argo CD's OCI sources deploy,
// pushes them, and reads them back.
//
// An artifact is an OCI image manifest with Flux's config media type and
// one layer, a gzipped tar of the files, of the standard OCI layer media
// type: source-controller extracts an artifact's first layer whatever its
// media type, and Argo CD's repo-server accepts
// application/vnd.oci.image.layer.v1.tar+gzip by default (not Flux's own
// content media type), so one artifact serves both. Packing is
// reproducible: the same files and metadata give the same digest (entries
// sorted, owner root, mode 0644, times the metadata's, gzip without a name
// or time).
package ociartifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The media types of an artifact.
const (
	// ConfigMediaType is Flux's artifact config (`flux push artifact`
	// writes it; the config itself is empty).
	ConfigMediaType types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	// LayerMediaType is the standard gzipped tar layer, which both
	// source-controller and Argo CD read.
	LayerMediaType types.MediaType = types.OCILayer
)

// The annotations of an artifact's manifest. Source and revision are the
// OCI image annotations Flux records in an OCIRepository's artifact and
// shows as its origin.
const (
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
	// AnnotationSluice marks an artifact Sluice pushed, with the format
	// version: a tag pointing at an artifact without it is someone
	// else's, and is not moved unless asked.
	AnnotationSluice = "dev.sluice.artifact"
	// FormatVersion is the version of this package's packing.
	FormatVersion = "1"
)

// Meta is what an artifact says of its origin.
type Meta struct {
	// Source is the URL of the repository the files were rendered from.
	Source string
	// Revision is the source's revision as Flux writes it:
	// "main@sha1:<commit>".
	Revision string
	// Created is the source commit's time: the entries' times and the
	// created annotation, so that the same commit packs the same bytes.
	Created time.Time
	// Takeover, when set, says which folders a takeover locks (the
	// AnnotationTakeover annotation): the lock, visible in the registry.
	Takeover string
}

// AnnotationTakeover says which folders of an artifact a takeover locks,
// and until when ("alice@laptop holds apps/web until 2026-12-06T20:00:00Z").
const AnnotationTakeover = "dev.sluice.takeover"

// Limits bound what Read accepts from a registry: an artifact is someone
// else's input until proven ours.
type Limits struct {
	// Compressed is the most bytes of the layer read from the registry.
	Compressed int64
	// Size is the most bytes of all files, uncompressed.
	Size int64
	// Entries is the most files.
	Entries int
}

// DefaultLimits are the limits of a hydrated destination: as a render's
// output (128 MiB) and entries (100,000).
func DefaultLimits() Limits {
	return Limits{Compressed: 128 << 20, Size: 128 << 20, Entries: 100000}
}

// Pack makes an artifact of files (paths relative, slash-separated, inside
// the artifact; contents).
func Pack(files map[string][]byte, m Meta) (v1.Image, error) {
	layer, err := tarball(files, m.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(layer, LayerMediaType)})
	if err != nil {
		return nil, err
	}
	ann := map[string]string{AnnotationSluice: FormatVersion}
	if m.Source != "" {
		ann[AnnotationSource] = m.Source
	}
	if m.Revision != "" {
		ann[AnnotationRevision] = m.Revision
	}
	if m.Takeover != "" {
		ann[AnnotationTakeover] = m.Takeover
	}
	if !m.Created.IsZero() {
		ann[AnnotationCreated] = m.Created.UTC().Format(time.RFC3339)
	}
	return mutate.Annotations(img, ann).(v1.Image), nil
}

// tarball writes files as a gzipped tar, entries sorted, each a regular
// file of mode 0644 owned by root, dated at.
func tarball(files map[string][]byte, at time.Time) ([]byte, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		if err := checkPath(name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if at.IsZero() {
		at = time.Unix(0, 0)
	}
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, name := range names {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(files[name])), ModTime: at.UTC().Truncate(time.Second), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkPath refuses a path that is not a clean relative path to a file
// inside the artifact.
func checkPath(name string) error {
	switch {
	case name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\"):
		return fmt.Errorf("%q: not a relative path inside the artifact", name)
	case path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../"):
		return fmt.Errorf("%q: not a clean path inside the artifact", name)
	}
	return nil
}

// Files reads an artifact's files, within limits: its one layer must be a
// gzipped tar of regular files at clean relative paths (directories are
// skipped; links, devices and paths that climb out are refused, naming
// the entry).
func Files(img v1.Image, l Limits) (map[string][]byte, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("reading the artifact's manifest: %w", err)
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("the artifact has %d layers; a hydrated artifact has one", len(m.Layers))
	}
	desc := m.Layers[0]
	switch desc.MediaType {
	case LayerMediaType, "application/vnd.cncf.flux.content.v1.tar+gzip":
	default:
		return nil, fmt.Errorf("the artifact's layer is %s, not a gzipped tar (%s)", desc.MediaType, LayerMediaType)
	}
	if desc.Size > l.Compressed {
		return nil, fmt.Errorf("the artifact's layer is %d bytes, over the limit of %d", desc.Size, l.Compressed)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return nil, fmt.Errorf("reading the artifact's layer: %w", err)
	}
	defer rc.Close()
	gz, err := gzip.NewReader(io.LimitReader(rc, l.Compressed+1))
	if err != nil {
		return nil, fmt.Errorf("the artifact's layer is not gzip: %w", err)
	}
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the artifact's layer is not a tar: %w", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := checkPath(strings.TrimSuffix(name, "/")); err != nil {
				return nil, fmt.Errorf("the artifact's entry %w", err)
			}
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("the artifact's entry %q is not a regular file (type %q)", hdr.Name, hdr.Typeflag)
		}
		if err := checkPath(name); err != nil {
			return nil, fmt.Errorf("the artifact's entry %w", err)
		}
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("the artifact's entry %q appears twice", name)
		}
		if len(files) >= l.Entries {
			return nil, fmt.Errorf("the artifact holds over %d files", l.Entries)
		}
		if hdr.Size < 0 || total+hdr.Size > l.Size {
			return nil, fmt.Errorf("the artifact's files are over %d bytes (at %q)", l.Size, name)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size+1))
		if err != nil {
			return nil, fmt.Errorf("reading the artifact's entry %q: %w", name, err)
		}
		if int64(len(data)) != hdr.Size {
			return nil, fmt.Errorf("the artifact's entry %q is %d bytes, its header says %d", name, len(data), hdr.Size)
		}
		total += hdr.Size
		files[name] = data
	}
	return files, nil
}

// Ours reports whether a manifest's annotations say Sluice pushed it.
func Ours(m *v1.Manifest) bool {
	return m != nil && m.Annotations[AnnotationSluice] != ""
}
