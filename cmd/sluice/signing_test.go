package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"sluice.dev/sluice/internal/testenv"
)

// `sluice hydrate --signing-key` signs its commits with an SSH key; git
// verifies them against an allowed-signers file, as a protected branch's
// check would.
func TestHydrateSignsItsCommits(t *testing.T) {
	syncs, srv, cache := cliFixture(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "identity")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	pub, _ := ssh.NewPublicKey(priv.Public())
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	os.WriteFile(allowed, []byte("sluice@sluice.dev "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))+"\n"), 0o644)

	if _, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--signing-key", keyFile); code != 0 {
		t.Fatalf("hydrate --signing-key: exit %d\n%s", code, stderr)
	}
	clone := t.TempDir()
	testenv.Git(t, clone, "clone", "-q", "--branch", "env/dev", srv.URL("deploy"), ".")
	cmd := exec.Command("git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", "HEAD")
	cmd.Dir = clone
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `Good "git" signature for sluice@sluice.dev`) {
		t.Errorf("git verify-commit HEAD: %v\n%s", err, out)
	}

	if _, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--signing-key", syncs); code != 2 || !strings.Contains(stderr, "--signing-key") {
		t.Errorf("a signing key that is not one: exit %d\n%s", code, stderr)
	}
}
