// Package anchors bounds what YAML anchors and aliases expand to. An alias
// stands for a copy of the node its anchor names, so a few kilobytes of
// nested aliases (the "billion laughs") expand to gigabytes in any parser
// that copies them: kustomize, Flux, Argo CD, or Sluice's own decoders.
// Check counts the expansion on the parsed tree, where an alias is one node,
// before anything expands it.
package anchors

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// DefaultLimit is how many nodes aliases may add to one file by default:
// far beyond what shared blocks of a values file or a manifest need, and
// far below what fills a machine's memory.
const DefaultLimit = 100_000

// Error says that a document's aliases expand past the limit.
type Error struct {
	// Document is the 1-based document of a multi-document file.
	Document int
	// Line is where the alias that crossed the limit is.
	Line int
	// Limit is the limit crossed.
	Limit int
	// Cycle is set when an alias refers to a node that holds it: the
	// expansion is infinite.
	Cycle bool
}

func (e *Error) Error() string {
	if e.Cycle {
		return fmt.Sprintf("document %d, line %d: a YAML alias refers to the node that holds it, which expands without end", e.Document, e.Line)
	}
	return fmt.Sprintf("document %d, line %d: YAML aliases expand to more than %d nodes (an alias bomb?)", e.Document, e.Line, e.Limit)
}

// Check reports an *Error when the aliases of any document of data would
// add more than limit nodes to it when expanded (limit <= 0 means
// DefaultLimit). Data that does not parse as YAML passes: whatever reads it
// next reports its syntax. Data without both "&" and "*" has no aliases
// and is not parsed at all.
func Check(data []byte, limit int) error {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if bytes.IndexByte(data, '*') < 0 || bytes.IndexByte(data, '&') < 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return nil // not YAML: not ours to report
		}
		if err := CheckNode(&n, limit); err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Document = doc
			}
			return err
		}
	}
}

// CheckNode is Check of one parsed document.
func CheckNode(n *yaml.Node, limit int) error {
	if limit <= 0 {
		limit = DefaultLimit
	}
	c := &counter{limit: limit, size: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	_, err := c.count(n)
	return err
}

// counter sizes nodes as expanded: an alias is as large as its anchor's
// node, computed once per anchor however often it is used.
type counter struct {
	limit int
	added int // nodes that aliases add
	size  map[*yaml.Node]int
	open  map[*yaml.Node]bool
}

func (c *counter) count(n *yaml.Node) (int, error) {
	if n == nil {
		return 0, nil
	}
	if s, ok := c.size[n]; ok {
		return s, nil
	}
	if c.open[n] {
		return 0, &Error{Line: n.Line, Cycle: true}
	}
	c.open[n] = true
	defer delete(c.open, n)
	total := 1
	if n.Kind == yaml.AliasNode {
		s, err := c.count(n.Alias)
		if err != nil {
			if e, ok := err.(*Error); ok && e.Line == 0 {
				e.Line = n.Line
			}
			return 0, err
		}
		c.added += s
		if c.added > c.limit {
			return 0, &Error{Line: n.Line, Limit: c.limit}
		}
		total = s
	}
	for _, child := range n.Content {
		s, err := c.count(child)
		if err != nil {
			return 0, err
		}
		total += s
	}
	c.size[n] = total
	return total, nil
}
