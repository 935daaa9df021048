package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// maxArchiveEntries bounds the files one chart archive holds, its
// subcharts' archives included: a chart of a million empty files is no
// chart, and helm's loader keeps each in memory.
const maxArchiveEntries = 100_000

// loadArchive loads a chart's archive, once what it expands to (its
// subcharts' archives under charts/ too) is counted against the render's
// read budget: a few compressed megabytes may expand to gigabytes.
func loadArchive(g *guard, data []byte, what string) (*chart.Chart, error) {
	if err := g.chargeArchive(what, data); err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return ch, nil
}

// chargeArchive counts what a gzipped tar expands to against the read
// budget, reading it through (without keeping it), and the same of every
// chart archive it holds.
func (g *guard) chargeArchive(what string, data []byte) error {
	entries := 0
	return g.expand(what, data, &entries, 0)
}

func (g *guard) expand(what string, data []byte, entries *int, depth int) error {
	if depth > 10 {
		return fmt.Errorf("%s: chart archives nested more than 10 deep", what)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	tr := tar.NewReader(zr)
	for {
		if err := g.ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if *entries++; *entries > maxArchiveEntries {
			return &LimitError{What: what + ": the files of the chart's archives", Got: fmt.Sprint(*entries), Max: fmt.Sprint(maxArchiveEntries), Flag: FlagReadBytes}
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(hdr.Name)
		// A subchart's archive is expanded in turn when the chart loads:
		// keep it (within the budget) to count what it expands to.
		nested := strings.HasSuffix(name, ".tgz") && path.Base(path.Dir(name)) == "charts"
		var buf bytes.Buffer
		var sink io.Writer = io.Discard
		if nested {
			sink = &buf
		}
		// Counted as it is read, in steps: a lying header or an endless
		// stream stops at the budget, not at its end.
		for {
			n, err := io.CopyN(sink, tr, 1<<20)
			if n > 0 {
				if total := g.read.Add(n); total > g.lim.ReadBytes {
					return &LimitError{What: what + ": what its archive expands to", Got: bytesString(total) + " with " + name, Max: bytesString(g.lim.ReadBytes) + " per render", Flag: FlagReadBytes}
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %s: %w", what, name, err)
			}
		}
		if nested {
			if err := g.expand(what+": "+name, buf.Bytes(), entries, depth+1); err != nil {
				return err
			}
		}
	}
}
