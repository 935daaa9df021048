package testenv

import (
	"fmt"
	"strings"
)

// AliasBomb is a "billion laughs" as YAML mapping entries: levels of lists
// of ten aliases of the level before, 10^levels strings once expanded, a
// few kilobytes as written. Appended to an object's YAML, it makes the
// object a bomb.
func AliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("x0: &x0 [\"lol\"]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "x%d: &x%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*x%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}
