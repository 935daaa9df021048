package cluster

import "strings"

// containsWord reports whether s holds w not followed by more of a name
// (so "ConfigMap/a/b" does not match inside "ConfigMap/a/bc").
func containsWord(s, w string) bool { return indexWord(s, w, 0) >= 0 }

func indexWord(s, w string, from int) int {
	for i := from; i <= len(s)-len(w); {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return -1
		}
		end := i + j + len(w)
		if end == len(s) || !isNameByte(s[end]) {
			return i + j
		}
		i += j + 1
	}
	return -1
}

func replaceWord(s, w, with string) string {
	var b strings.Builder
	for from := 0; ; {
		i := indexWord(s, w, from)
		if i < 0 {
			b.WriteString(s[from:])
			return b.String()
		}
		b.WriteString(s[from:i])
		b.WriteString(with)
		from = i + len(w)
	}
}

func isNameByte(c byte) bool {
	return c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z'
}
