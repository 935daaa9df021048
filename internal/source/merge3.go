package source

import (
	"bytes"

	"github.com/pmezard/go-difflib/difflib"
)

// Merge3 merges the changes ours and theirs made to base, line by line,
// as diff3 does: where only one side changed a run of lines its change is
// taken, where both made the same change it is taken once; false when
// both changed the same run differently (a conflict).
func Merge3(base, ours, theirs []byte) ([]byte, bool) {
	b, o, t := lines(base), lines(ours), lines(theirs)
	mo, mt := matches(b, o), matches(b, t)
	var out bytes.Buffer
	pb, po, pt := 0, 0, 0
	for i := 0; i <= len(b); i++ {
		if i < len(b) && (mo[i] < 0 || mt[i] < 0) {
			continue
		}
		eo, et := len(o), len(t)
		if i < len(b) {
			eo, et = mo[i], mt[i]
		}
		cb, co, ct := b[pb:i], o[po:eo], t[pt:et]
		switch {
		case equal(co, cb):
			write(&out, ct)
		case equal(ct, cb), equal(co, ct):
			write(&out, co)
		default:
			return nil, false
		}
		if i < len(b) {
			out.WriteString(b[i])
			pb, po, pt = i+1, eo+1, et+1
		}
	}
	return out.Bytes(), true
}

// lines splits text into lines that keep their line ends.
func lines(text []byte) []string {
	var out []string
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			i = len(text) - 1
		}
		out = append(out, string(text[:i+1]))
		text = text[i+1:]
	}
	return out
}

// matches maps each line of a to the line of b it is matched with, or -1.
func matches(a, b []string) []int {
	m := make([]int, len(a))
	for i := range m {
		m[i] = -1
	}
	for _, blk := range difflib.NewMatcherWithJunk(a, b, false, nil).GetMatchingBlocks() {
		for k := 0; k < blk.Size; k++ {
			m[blk.A+k] = blk.B + k
		}
	}
	return m
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func write(w *bytes.Buffer, ls []string) {
	for _, l := range ls {
		w.WriteString(l)
	}
}
