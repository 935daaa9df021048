package render

import (
	"bytes"
	"context"
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
// folder, and one that leads back to a folder above it is a cycle.
//
// With o set, the folder is read as an Argo CD directory source is: its
// sub-folders only when o.Recurse, hidden files too (.git aside), a file
// only when o.Match accepts its path relative to dir, and none that holds
// the marker +argocd:skip-file-rendering.
func plainDir(ctx context.Context, g *guard, dir string, o *Directory) (objs []*yaml.RNode, origins []string, size int64, err error) {
	p := &parser{lim: g.lim}
	err = source.Walk(ctx, g, dir, source.WalkOptions{}, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		hidden := strings.HasPrefix(d.Name(), ".")
		if o != nil {
			hidden = d.Name() == ".git"
		}
		if f != dir && hidden {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if o != nil && d.IsDir() && f != dir && !o.Recurse {
			return fs.SkipDir
		}
		if o != nil && !d.IsDir() && o.Match != nil && !o.Match(strings.TrimPrefix(f, dir+"/")) {
			return nil
		}
		if d.IsDir() {
			if f != dir {
				return contained(g, f, dir, "the folder")
			}
			return nil
		}
		switch path.Ext(f) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if err := contained(g, f, dir, "the folder"); err != nil {
			return err
		}
		data, err := g.ReadFile(f)
		if err != nil {
			return err
		}
		if o != nil && bytes.Contains(data, []byte("+argocd:skip-file-rendering")) {
			return nil
		}
		// What a folder holds is what it outputs: past the output limit,
		// it stops before parsing more.
		size += int64(len(data))
		if size > g.lim.OutputBytes {
			return &LimitError{What: "the output", Got: "more than " + bytesString(g.lim.OutputBytes) + ", with " + f, Max: bytesString(g.lim.OutputBytes), Flag: FlagOutputBytes}
		}
		nodes, err := p.parse(f, data)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			origins = append(origins, fmt.Sprintf("%s:%d", f, n.YNode().Line))
		}
		objs = append(objs, nodes...)
		return nil
	})
	return objs, origins, size, err
}

// Directory says how a plain folder is read, when not as Sluice reads
// one (see plainDir).
type Directory struct {
	Recurse bool
	// Match, if set, says whether a file (its path relative to the
	// folder) is read.
	Match func(rel string) bool
}

// ParseObjects parses a multi-document YAML (or a JSON object) into
// Kubernetes objects, naming the file, document and line of any that is
// not one. Empty documents are skipped; a List is expanded. YAML aliases
// are expanded (within anchors.DefaultLimit), so that the objects are
// plain YAML for whatever reads them next.
func ParseObjects(file string, data []byte) ([]*yaml.RNode, error) {
	p := &parser{lim: DefaultLimits()}
	p.lim.Objects = int(^uint(0) >> 1)
	return p.parse(file, data)
}

// parser parses the files of one render, within its limits: aliases per
// file, objects counted across files as they are parsed (a file of half
// a million one-line objects stops at the limit, not after), nesting.
type parser struct {
	lim     Limits
	objects int
}

func (p *parser) parse(file string, data []byte) ([]*yaml.RNode, error) {
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
			if err := anchors.CheckNode(&doc, p.lim.AliasNodes); err != nil {
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
		if d := nodeDepth(doc.Content[0]); d > p.lim.Depth {
			return nil, depthError(fmt.Sprintf("%s: document %d", file, i), line, d, p.lim.Depth)
		}
		if n.YNode().Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s: document %d (line %d): not a mapping", file, i, line)
		}
		if hasAliases {
			if err := n.DeAnchor(); err != nil {
				return nil, fmt.Errorf("%s: document %d (line %d): %w", file, i, line, err)
			}
		}
		var err error
		if out, err = p.object(file, fmt.Sprintf("document %d", i), n, out); err != nil {
			return nil, err
		}
	}
}

// object appends n to out, or, for a List (a kind ending in "List" with
// items, as kustomize reads one), its items, each read the same way: a
// List inside a List is expanded too, at any depth, as kustomize and
// kubectl expand it, so that nothing downstream meets an object wrapped
// in another (a Secret in a List in a List is a Secret). where names n
// in errors ("document 2", "document 2: items[0]").
func (p *parser) object(file, where string, n *yaml.RNode, out []*yaml.RNode) ([]*yaml.RNode, error) {
	line := n.YNode().Line
	if n.YNode().Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: %s (line %d): not a mapping", file, where, line)
	}
	if err := duplicateKeys(n); err != nil {
		return nil, fmt.Errorf("%s: %s (line %d): %w", file, where, line, err)
	}
	if err := untag(n, "apiVersion", "kind"); err != nil {
		return nil, fmt.Errorf("%s: %s (line %d): %w", file, where, line, err)
	}
	if n.GetKind() == "" || n.GetApiVersion() == "" {
		return nil, fmt.Errorf("%s: %s (line %d): not a Kubernetes object: apiVersion and kind are required", file, where, line)
	}
	items := n.Field("items")
	if !strings.HasSuffix(n.GetKind(), "List") || items == nil {
		if err := p.count(file, 1); err != nil {
			return nil, err
		}
		return append(out, n), nil
	}
	if items.Value.IsNil() {
		return out, nil // an empty List
	}
	elems, err := items.Value.Elements()
	if err != nil {
		return nil, fmt.Errorf("%s: %s (line %d): items: %w", file, where, line, err)
	}
	for j, e := range elems {
		if out, err = p.object(file, fmt.Sprintf("%s: items[%d]", where, j), e, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// untag writes the fields of n given a tag ("kind: !!binary U2VjcmV0")
// as the plain strings a YAML decoder reads them as, so that Sluice reads
// the kind and apiVersion whatever applies the object reads.
func untag(n *yaml.RNode, fields ...string) error {
	for _, name := range fields {
		f := n.Field(name)
		if f == nil || f.Value == nil {
			continue
		}
		v := f.Value.YNode()
		if v.Kind != yaml.ScalarNode || v.Tag == "" || v.Tag == "!!str" {
			continue
		}
		var s string
		if err := v.Decode(&s); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		v.Value, v.Tag, v.Style = s, "!!str", 0
	}
	return nil
}

// duplicateKeys refuses an object whose mapping, or whose metadata, names
// a key twice: YAML parsers differ on which one wins (the first here, the
// last or an error elsewhere), so "kind: ConfigMap" above "kind: Secret"
// could be one object to Sluice and another to what applies it.
func duplicateKeys(n *yaml.RNode) error {
	check := func(m *goyaml.Node, where string) error {
		seen := map[string]bool{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i].Value
			if seen[k] {
				return fmt.Errorf("%s%s is given twice (line %d)", where, k, m.Content[i].Line)
			}
			seen[k] = true
		}
		return nil
	}
	if err := check(n.YNode(), ""); err != nil {
		return err
	}
	if md := n.Field("metadata"); md != nil && md.Value.YNode().Kind == yaml.MappingNode {
		return check(md.Value.YNode(), "metadata.")
	}
	return nil
}

// count counts n more objects against the limit.
func (p *parser) count(file string, n int) error {
	p.objects += n
	if p.objects > p.lim.Objects {
		return &LimitError{What: "the objects rendered", Got: fmt.Sprintf("more than %d, with %s", p.lim.Objects, file), Max: fmt.Sprint(p.lim.Objects), Flag: FlagObjects}
	}
	return nil
}
