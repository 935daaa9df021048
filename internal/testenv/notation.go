package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NotationCLI is the real Notation CLI (`make tools` builds it) with a
// configuration directory of its own: its test keys and certificates
// (`notation cert generate-test`) and trust stores.
type NotationCLI struct {
	bin, home string
}

// NewNotationCLI makes a configuration directory for the CLI, with a
// test key and certificate of each name (the first the default signing
// key).
func NewNotationCLI(t TB, keys ...string) *NotationCLI {
	t.Helper()
	n := &NotationCLI{bin: NotationBinary(t), home: t.TempDir()}
	for i, k := range keys {
		args := []string{"cert", "generate-test", k}
		if i == 0 {
			args = append(args, "--default")
		}
		n.Run(t, args...)
	}
	return n
}

// Run runs the CLI with args and returns its output.
func (n *NotationCLI) Run(t TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(n.bin, args...)
	cmd.Env = []string{"HOME=" + n.home, "XDG_CONFIG_HOME=" + filepath.Join(n.home, "config"), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("notation %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Sign signs repo@digest in reg (`notation sign`), with the default key
// unless args name another (--key NAME), in the format args give.
func (n *NotationCLI) Sign(t TB, reg *Registry, repo, digest string, args ...string) {
	t.Helper()
	n.Run(t, append(append([]string{"sign", "--insecure-registry"}, args...), reg.Host+"/"+repo+"@"+digest)...)
}

// Certificate is the test certificate of key (PEM).
func (n *NotationCLI) Certificate(t TB, key string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.home, "config", "notation", "localkeys", key+".crt"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return data
}

// Key is the test private key of key (PEM), as `notation cert
// generate-test` wrote it.
func (n *NotationCLI) Key(t TB, key string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.home, "config", "notation", "localkeys", key+".key"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	return data
}

// Dir is the CLI's home, for files its commands read (a trust policy to
// import).
func (n *NotationCLI) Dir() string { return n.home }
