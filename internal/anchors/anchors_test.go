package anchors

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// laughs builds the classic bomb: each level is a list of ten aliases of
// the level before it, so n levels expand to 10^n strings.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [\"lol\"]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		limit int
		want  string // "" for no error
	}{
		{name: "no aliases", data: "a: 1\nb: [1, 2]\n"},
		{name: "star in a string is no alias", data: "a: \"*x&y\"\n"},
		{name: "modest reuse", data: "base: &b {cpu: 1, mem: 2}\nx: *b\ny: *b\nz: {<<: *b, disk: 3}\n"},
		{name: "billion laughs", data: laughs(9), want: "expand to more than 100000 nodes"},
		{name: "under a raised limit", data: laughs(4), limit: 50_000},
		{name: "over a lowered limit", data: laughs(4), limit: 1000, want: "more than 1000 nodes"},
		{name: "second document", data: "a: 1\n---\n" + laughs(8), want: "document 2"},
		{name: "not YAML", data: "{{ .Values.x | default \"*\" }} & {{ end }\n: :"},
		{name: "self reference", data: "a: &x [1, *x]\n", want: "expands without end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.data), tt.limit)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tt.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error is %T, not *Error", err)
			}
		})
	}
}

func BenchmarkCheckBomb(b *testing.B) {
	data := []byte(laughs(9))
	for b.Loop() {
		Check(data, 0)
	}
}
