package main

import (
	"strings"
	"testing"
)

// sluice serve refuses bad flags before it reaches any cluster, with one
// line that names the flag.
func TestServeRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--log-level", "loud", "--kubeconfig", "/nonexistent"}, 2, "--log-level"},
		{[]string{"serve", "--log-encoding", "xml", "--kubeconfig", "/nonexistent"}, 2, "--log-encoding"},
		{[]string{"serve", "--max-file-size", "huge", "--kubeconfig", "/nonexistent"}, 2, "--max-file-size"},
		{[]string{"serve", "--kubeconfig", "/nonexistent/kubeconfig"}, 2, "kubeconfig"},
		{[]string{"serve", "extra"}, 2, "unknown"},
	} {
		_, stderr, code := run(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("sluice %s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, stderr, c.code, c.want)
		}
	}
}
