package render

import (
	"bytes"
	"fmt"

	goyaml "go.yaml.in/yaml/v3"
)

// yamlDepth estimates how deeply a YAML or JSON document nests, from its
// bytes, in one pass: the block levels open at each line (by indentation,
// and one more for each "- " that starts a line's content), plus the flow
// collections ([ and {) open outside quotes, skipping comments and block
// scalars' text. It may err high by a level or two (a sequence of
// scalars counts the scalars' line as a level), or low by at most half
// (a sequence written at its key's indentation counts once with it): a
// document twice as deep as the limit never passes. It costs far less
// than a parse, so what kustomize is handed is checked before kustomize
// spends seconds per thousand levels on it. It returns the deepest level
// and its line.
func yamlDepth(data []byte) (depth, line int) {
	var stack []int // indentation of the open block levels
	flow := 0
	scalarIndent := -1 // inside a block scalar: its parent's indentation
	quote := byte(0)   // the quote open across lines in flow context
	for n, rest := 1, data; len(rest) > 0; n++ {
		l := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		indent := 0
		for indent < len(l) && l[indent] == ' ' {
			indent++
		}
		content := bytes.TrimRight(l[indent:], " \t\r")
		if scalarIndent >= 0 {
			if len(content) == 0 || indent > scalarIndent {
				continue // the block scalar's text
			}
			scalarIndent = -1
		}
		if len(content) == 0 || content[0] == '#' && quote == 0 {
			continue
		}
		if flow == 0 && quote == 0 {
			if bytes.HasPrefix(content, []byte("---")) || bytes.HasPrefix(content, []byte("...")) {
				stack = stack[:0]
				continue
			}
			for len(stack) > 0 && stack[len(stack)-1] >= indent {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, indent)
			// "- - - x": each marker opens a level of its own.
			for len(content) >= 2 && content[0] == '-' && (content[1] == ' ' || content[1] == '\t') {
				content = bytes.TrimLeft(content[2:], " \t")
				indent += 2
				stack = append(stack, indent)
			}
		}
		// Flow collections and quotes, token by token.
		prev := byte(' ')
		for i := 0; i < len(content); i++ {
			c := content[i]
			if quote != 0 {
				switch {
				case quote == '"' && c == '\\':
					i++
				case c == quote && quote == '\'' && i+1 < len(content) && content[i+1] == '\'':
					i++ // '' inside a single-quoted scalar
				case c == quote:
					quote = 0
				}
				prev = c
				continue
			}
			switch c {
			case '"', '\'':
				// A quote starts a scalar only where a token starts: not
				// the apostrophe of "don't".
				if prev == ' ' || prev == '\t' || prev == '[' || prev == '{' || prev == ',' || prev == ':' {
					quote = c
				}
			case '#':
				if prev == ' ' || prev == '\t' {
					i = len(content)
				}
			case '[', '{':
				flow++
				if d := len(stack) + flow; d > depth {
					depth, line = d, n
				}
			case ']', '}':
				if flow > 0 {
					flow--
				}
			}
			prev = c
		}
		if d := len(stack) + flow; d > depth {
			depth, line = d, n
		}
		if flow == 0 && quote == 0 && blockScalar(content) {
			scalarIndent = stack[len(stack)-1]
		}
	}
	return depth, line
}

// blockScalar reports whether a line's content ends in a block scalar's
// header ("key: |", "- >-", "key: |2 # comment").
func blockScalar(content []byte) bool {
	if i := bytes.Index(content, []byte(" #")); i >= 0 {
		content = bytes.TrimRight(content[:i], " \t")
	}
	i := bytes.LastIndexAny(content, "|>")
	if i < 0 || i > 0 && content[i-1] != ' ' {
		return false
	}
	for _, c := range content[i+1:] {
		if c != '-' && c != '+' && (c < '1' || c > '9') {
			return false
		}
	}
	return true
}

// nodeDepth is how deeply a parsed node nests.
func nodeDepth(n *goyaml.Node) int {
	deepest := 0
	for _, c := range n.Content {
		if d := nodeDepth(c); d > deepest {
			deepest = d
		}
	}
	if n.Kind == goyaml.MappingNode || n.Kind == goyaml.SequenceNode {
		return deepest + 1
	}
	return deepest
}

// depthError is a document nested past the limit.
func depthError(what string, line, got, max int) error {
	at := what
	if line > 0 {
		at = fmt.Sprintf("%s:%d", what, line)
	}
	return &LimitError{What: at + ": nesting", Got: fmt.Sprintf("%d levels", got), Max: fmt.Sprintf("%d levels", max), Flag: FlagDepth}
}
