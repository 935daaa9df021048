package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"golang.org/x/crypto/ssh"
)

// gitSigned makes a commit signed by git itself (`git commit -S`) with
// the settings given, and returns what a check reads of it.
func gitSigned(t *testing.T, env []string, config ...string) (payload []byte, signature string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append(env, "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
			"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("init", "-q")
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a: 1\n"), 0o644)
	run("add", ".")
	args := []string{}
	for _, c := range config {
		args = append(args, "-c", c)
	}
	run(append(args, "commit", "-q", "-S", "-m", "signed by git")...)
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := repo.Head()
	c, err := repo.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	obj := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(obj); err != nil {
		t.Fatal(err)
	}
	r, _ := obj.Reader()
	payload, _ = io.ReadAll(r)
	return payload, c.PGPSignature
}

func TestCommitsSignedByGitWithAnSSHKeyVerify(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	pub, _ := ssh.NewPublicKey(priv.Public())
	authorized := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	payload, sig := gitSigned(t, nil, "gpg.format=ssh", "user.signingkey="+keyFile)

	v, err := ParseVerifier(map[string][]byte{"allowed_signers": []byte("# the team\ndev@example.com namespaces=\"git\" " + authorized + "\n")})
	if err != nil {
		t.Fatal(err)
	}
	who, err := v.Verify(payload, sig)
	if err != nil || !strings.HasPrefix(who, "dev@example.com (SSH SHA256:") {
		t.Errorf("Verify = %q, %v", who, err)
	}
	if _, err := v.Verify(append(payload, 'x'), sig); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a changed commit: %v", err)
	}
	if _, err := v.Verify(payload, ""); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("an unsigned commit: %v", err)
	}
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	op, _ := ssh.NewPublicKey(other.Public())
	w, _ := ParseVerifier(map[string][]byte{"keys": ssh.MarshalAuthorizedKey(op)})
	if _, err := w.Verify(payload, sig); err == nil || !strings.Contains(err.Error(), ssh.FingerprintSHA256(pub)) || !strings.Contains(err.Error(), "not a trusted key") {
		t.Errorf("another key trusted: %v", err)
	}
}

func TestCommitsSignedByGitWithGnuPGVerify(t *testing.T) {
	home := t.TempDir()
	os.Chmod(home, 0o700)
	gpg := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("gpg", append([]string{"--batch", "--homedir", home}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	gpg("", "--passphrase", "", "--quick-gen-key", "Dev <dev@example.com>", "ed25519", "sign", "never")
	pub := gpg("", "--armor", "--export", "dev@example.com")
	payload, sig := gitSigned(t, []string{"GNUPGHOME=" + home}, "user.signingkey=dev@example.com")
	v, err := ParseVerifier(map[string][]byte{"dev.asc": []byte(pub)})
	if err != nil {
		t.Fatal(err)
	}
	if who, err := v.Verify(payload, sig); err != nil || !strings.HasPrefix(who, "Dev <dev@example.com> (OpenPGP ") {
		t.Errorf("Verify = %q, %v", who, err)
	}
	if _, err := v.Verify(append(payload, 'x'), sig); err == nil {
		t.Error("a changed commit verified")
	}
}

func TestAVerifierNeedsAKey(t *testing.T) {
	if _, err := ParseVerifier(map[string][]byte{"x": []byte("# nothing\n")}); err == nil {
		t.Error("no key: no error")
	}
	if _, err := ParseVerifier(map[string][]byte{"x": []byte("dev@example.com not-a-key\n")}); err == nil || !strings.Contains(err.Error(), "x line 1") {
		t.Errorf("a bad line: %v", err)
	}
}
