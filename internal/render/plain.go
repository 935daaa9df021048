package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	goyaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/internal/anchors"
	"sluice.dev/sluice/internal/source"
)

// plainDir reads every YAML and JSON file under dir, recursively, in path
// order, skipping hidden files and folders. Each object's origin is its
// file and line. Every file must be inside dir: a symbolic link that leads
// out of it is refused, as kustomize refuses one out of a kustomization's
// folder.
func plainDir(fsys source.FS, dir string, aliasLimit int) (objs []*yaml.RNode, origins []string, size int64, err error) {
	err = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p != dir {
				return contained(fsys, p, dir, "the folder")
			}
			return nil
		}
		switch path.Ext(p) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if err := contained(fsys, p, dir, "the folder"); err != nil {
			return err
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		size += int64(len(data))
		nodes, err := parseObjects(p, data, aliasLimit)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			origins = append(origins, fmt.Sprintf("%s:%d", p, n.YNode().Line))
		}
		objs = append(objs, nodes...)
		return nil
	})
	return objs, origins, size, err
}

// ParseObjects parses a multi-document YAML (or a JSON object) into
// Kubernetes objects, naming the file, document and line of any that is
// not one. Empty documents are skipped; a List is expanded. YAML aliases
// are expanded (within anchors.DefaultLimit), so that the objects are
// plain YAML for whatever reads them next.
func ParseObjects(file string, data []byte) ([]*yaml.RNode, error) {
	return parseObjects(file, data, anchors.DefaultLimit)
}

func parseObjects(file string, data []byte, aliasLimit int) ([]*yaml.RNode, error) {
	hasAliases := bytes.IndexByte(data, '*') >= 0 && bytes.IndexByte(data, '&') >= 0
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.RNode
	for i := 1; ; i++ {
		var doc goyaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		if hasAliases {
			if err := anchors.CheckNode(&doc, aliasLimit); err != nil {
				var ae *anchors.Error
				if errors.As(err, &ae) {
					ae.Document = i
				}
				return nil, fmt.Errorf("%s: %w; raise the limit with %s if this is expected", file, err, FlagAliasNodes)
			}
		}
		n := yaml.NewRNode(doc.Content[0])
		if n.IsNilOrEmpty() {
			continue
		}
		line := n.YNode().Line
		if n.YNode().Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: document %d (line %d): not a mapping", file, i, line)
		}
		if hasAliases {
			if err := n.DeAnchor(); err != nil {
				return nil, fmt.Errorf("%s: document %d (line %d): %w", file, i, line, err)
			}
		}
		if n.GetKind() == "" || n.GetApiVersion() == "" {
			return nil, fmt.Errorf("%s: document %d (line %d): not a Kubernetes object: apiVersion and kind are required", file, i, line)
		}
		if strings.HasSuffix(n.GetKind(), "List") && n.Field("items") != nil {
			elems, err := n.Field("items").Value.Elements()
			if err != nil {
				return nil, fmt.Errorf("%s: document %d (line %d): items: %w", file, i, line, err)
			}
			out = append(out, elems...)
			continue
		}
		out = append(out, n)
	}
}
