package ociartifact

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var folder = map[string][]byte{
	"apps/web/deployment-web.yaml": []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"),
	"apps/web/configmap-web.yaml":  []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: blue}\n"),
	"apps/api/manifest.yaml":       []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api}\n"),
}

var meta = Meta{Source: "https://git.example.com/team/app.git", Revision: "main@sha1:" + strings.Repeat("ab", 20), Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}

// The same files and metadata pack the same bytes, whatever order they
// come in; the manifest carries the media types Flux and Argo CD read,
// and the origin; the entries are sorted, owned by root, 0644, dated at
// the source commit.
func TestPackingIsReproducible(t *testing.T) {
	a, err := Pack(folder, meta)
	if err != nil {
		t.Fatal(err)
	}
	again := map[string][]byte{}
	for _, k := range []string{"apps/api/manifest.yaml", "apps/web/configmap-web.yaml", "apps/web/deployment-web.yaml"} {
		again[k] = folder[k]
	}
	b, err := Pack(again, meta)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("the same folder packed twice: %s and %s", da, db)
	}
	later := meta
	later.Created = later.Created.Add(time.Hour)
	if c, _ := Pack(folder, later); digestOf(t, c) == da {
		t.Errorf("another commit time gives the same digest: the time is not in the artifact")
	}

	m, err := a.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("media types: manifest %s, config %s, layers %v", m.MediaType, m.Config.MediaType, m.Layers)
	}
	for k, want := range map[string]string{AnnotationSource: meta.Source, AnnotationRevision: meta.Revision, AnnotationCreated: "2026-12-01T10:00:00Z", AnnotationSluice: FormatVersion} {
		if got := m.Annotations[k]; got != want {
			t.Errorf("annotation %s = %q, want %q", k, got, want)
		}
	}
	layers, _ := a.Layers()
	rc, _ := layers[0].Compressed()
	gz, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header names %q at %s: not reproducible", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(meta.Created) || h.Typeflag != tar.TypeReg {
			t.Errorf("%s: mode %o uid %d gid %d uname %q time %s type %c", h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime, h.Typeflag)
		}
	}
	if strings.Join(names, " ") != "apps/api/manifest.yaml apps/web/configmap-web.yaml apps/web/deployment-web.yaml" {
		t.Errorf("entries in the order %v", names)
	}
	files, err := Files(a, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(folder) || string(files["apps/web/configmap-web.yaml"]) != string(folder["apps/web/configmap-web.yaml"]) {
		t.Errorf("read back %d files: %v", len(files), files)
	}
	if _, err := Pack(map[string][]byte{"../x.yaml": nil}, meta); err == nil || !strings.Contains(err.Error(), `"../x.yaml"`) {
		t.Errorf("packing ../x.yaml: %v", err)
	}
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// entry is one tar entry of a hand-made layer.
type entry struct {
	name     string
	typ      byte
	data     string
	size     int64 // when not len(data)
	linkname string
}

func layerOf(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		size := int64(len(e.data))
		if e.typ != tar.TypeReg {
			size = 0
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: e.typ, Size: size, Mode: 0o644, Linkname: e.linkname}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.data)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func imageOf(t *testing.T, mt types.MediaType, layers ...[]byte) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	for _, l := range layers {
		var err error
		if img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(l, mt)}); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// A registry's artifact is read as hostile input: only regular files at
// clean relative paths, within the limits; each refusal names the entry.
func TestReadingRefusesHostileArtifacts(t *testing.T) {
	small := Limits{Compressed: 1 << 20, Size: 100, Entries: 3}
	reg := func(name, data string) entry { return entry{name: name, typ: tar.TypeReg, data: data} }
	tests := []struct {
		name string
		img  v1.Image
		want string
	}{
		{"climbs out", imageOf(t, types.OCILayer, layerOf(t, []entry{reg("../../etc/cron.d/x", "x")})), `"../../etc/cron.d/x"`},
		{"absolute", imageOf(t, types.OCILayer, layerOf(t, []entry{reg("/etc/passwd", "x")})), `"/etc/passwd"`},
		{"unclean", imageOf(t, types.OCILayer, layerOf(t, []entry{reg("apps/../../x", "x")})), `"apps/../../x"`},
		{"symlink", imageOf(t, types.OCILayer, layerOf(t, []entry{{name: "apps/passwd", typ: tar.TypeSymlink, linkname: "/etc/passwd"}})), `"apps/passwd" is not a regular file`},
		{"hard link", imageOf(t, types.OCILayer, layerOf(t, []entry{{name: "apps/h", typ: tar.TypeLink, linkname: "x"}})), `"apps/h" is not a regular file`},
		{"device", imageOf(t, types.OCILayer, layerOf(t, []entry{{name: "dev/null", typ: tar.TypeChar}})), `"dev/null" is not a regular file`},
		{"twice", imageOf(t, types.OCILayer, layerOf(t, []entry{reg("a.yaml", "1"), reg("a.yaml", "2")})), `"a.yaml" appears twice`},
		{"too many files", imageOf(t, types.OCILayer, layerOf(t, []entry{reg("a", "1"), reg("b", "1"), reg("c", "1"), reg("d", "1")})), "over 3 files"},
		{"too large", imageOf(t, types.OCILayer, layerOf(t, []entry{reg("a", strings.Repeat("x", 60)), reg("b", strings.Repeat("x", 60))})), `over 100 bytes (at "b")`},
		{"not gzip", imageOf(t, types.OCILayer, []byte("plain text")), "not gzip"},
		{"two layers", imageOf(t, types.OCILayer, layerOf(t, nil), layerOf(t, nil)), "2 layers"},
		{"a chart", imageOf(t, "application/vnd.cncf.helm.chart.content.v1.tar+gzip", layerOf(t, nil)), "not a gzipped tar"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Files(tt.img, small)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("read: %v, want an error with %q", err, tt.want)
			}
		})
	}
	ok := imageOf(t, types.OCILayer, layerOf(t, []entry{{name: "apps/", typ: tar.TypeDir}, reg("./apps/a.yaml", "a: 1\n")}))
	if files, err := Files(ok, small); err != nil || string(files["apps/a.yaml"]) != "a: 1\n" {
		t.Errorf("a folder entry and a ./ prefix: %v %v", files, err)
	}
}
