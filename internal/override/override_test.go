package override

import "testing"

func TestParseSplitsFromAndToWhereverRefsAre(t *testing.T) {
	for _, c := range []struct{ spec, from, to string }{
		{"https://h/a.git=/tmp/a", "https://h/a.git", "/tmp/a"},
		{"https://h/a.git=https://h/a.git?ref=alice/feature", "https://h/a.git", "https://h/a.git?ref=alice/feature"},
		{"https://h/a.git?ref=main=https://h/a.git?ref=feat", "https://h/a.git?ref=main", "https://h/a.git?ref=feat"},
		{"git@h:o/a.git=../a", "git@h:o/a.git", "../a"},
	} {
		r, err := Parse(c.spec, "/")
		if err != nil || r.From != c.from || r.To != c.to {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", c.spec, r.From, r.To, err, c.from, c.to)
		}
	}
	for _, bad := range []string{"=x", "x=", "https://h/a.git?ref=main", "noequals"} {
		if _, err := Parse(bad, "/"); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
