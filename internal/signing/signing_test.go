package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	pgparmor "github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"

	"sluice.dev/sluice/internal/testenv"
)

// signedCommit writes a commit signed by s on top of a repository's HEAD
// and returns its hash.
func signedCommit(t *testing.T, dir string, s Signer) string {
	t.Helper()
	return signedCommitB(t, dir, s)
}

func signedCommitB(t testing.TB, dir string, s Signer) string {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	parent, err := repo.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	who := object.Signature{Name: "Sluice", Email: "sluice@sluice.dev", When: parent.Author.When.Add(1)}
	c := &object.Commit{Author: who, Committer: who, Message: "hydrate\n", TreeHash: parent.TreeHash, ParentHashes: []plumbing.Hash{parent.Hash}}
	if err := Sign(c, s); err != nil {
		t.Fatal(err)
	}
	obj := repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		t.Fatal(err)
	}
	h, err := repo.Storer.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// verify runs `git verify-commit` as a person checking a protected
// branch would, with the environment and settings given.
func verify(dir, commit string, env []string, config ...string) (string, error) {
	args := []string{}
	for _, c := range config {
		args = append(args, "-c", c)
	}
	cmd := exec.Command("git", append(args, "verify-commit", "-v", commit)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSSHSignedCommitsVerifyWithGit(t *testing.T) {
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 3072)
	if err != nil {
		t.Fatal(err)
	}
	for name, priv := range map[string]any{"ed25519": ed, "rsa": rsaKey} {
		t.Run(name, func(t *testing.T) {
			block, err := ssh.MarshalPrivateKey(priv, "")
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(pem.EncodeToMemory(block), nil)
			if err != nil {
				t.Fatal(err)
			}
			w := testenv.NewWork(t, "")
			w.Write(map[string]string{"a.yaml": "a: 1\n"}).Commit("init")
			commit := signedCommit(t, w.Dir, s)
			allowed := filepath.Join(t.TempDir(), "allowed_signers")
			os.WriteFile(allowed, []byte("sluice@sluice.dev "+s.(*sshSigner).PublicKey()+"\n"), 0o644)
			out, err := verify(w.Dir, commit, nil, "gpg.format=ssh", "gpg.ssh.allowedSignersFile="+allowed)
			if err != nil || !strings.Contains(out, `Good "git" signature for sluice@sluice.dev`) {
				t.Errorf("git verify-commit: %v\n%s", err, out)
			}
			// Another key's allowed-signers file: not verified.
			_, other, _ := ed25519.GenerateKey(rand.Reader)
			op, _ := ssh.NewPublicKey(other.Public())
			os.WriteFile(allowed, []byte("sluice@sluice.dev "+string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(op)))+"\n"), 0o644)
			if out, err := verify(w.Dir, commit, nil, "gpg.format=ssh", "gpg.ssh.allowedSignersFile="+allowed); err == nil {
				t.Errorf("verified against another key:\n%s", out)
			}
		})
	}
}

func TestOpenPGPSignedCommitsVerifyWithGit(t *testing.T) {
	e, err := openpgp.NewEntity("Sluice", "", "sluice@sluice.dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.PrivateKey.Encrypt([]byte("hunter2")); err != nil {
		t.Fatal(err)
	}
	var priv, pub bytes.Buffer
	w, _ := pgparmor.Encode(&priv, openpgp.PrivateKeyType, nil)
	if err := e.SerializePrivateWithoutSigning(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w, _ = pgparmor.Encode(&pub, openpgp.PublicKeyType, nil)
	e.Serialize(w)
	w.Close()

	if _, err := Parse(priv.Bytes(), nil); err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Errorf("an encrypted key without its passphrase: %v", err)
	}
	s, err := Parse(priv.Bytes(), []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	repo := testenv.NewWork(t, "")
	repo.Write(map[string]string{"a.yaml": "a: 1\n"}).Commit("init")
	commit := signedCommit(t, repo.Dir, s)

	home := t.TempDir()
	os.Chmod(home, 0o700)
	imp := exec.Command("gpg", "--batch", "--import")
	imp.Env = append(os.Environ(), "GNUPGHOME="+home)
	imp.Stdin = &pub
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("gpg --import: %v\n%s", err, out)
	}
	out, err := verify(repo.Dir, commit, []string{"GNUPGHOME=" + home})
	if err != nil || !strings.Contains(out, "Good signature from \"Sluice <sluice@sluice.dev>\"") {
		t.Errorf("git verify-commit: %v\n%s", err, out)
	}
	if !strings.HasPrefix(s.Identity(), "openpgp ") {
		t.Errorf("identity %q", s.Identity())
	}
}

func TestAKeyThatIsNeitherIsRefused(t *testing.T) {
	if _, err := Parse([]byte("hello"), nil); err == nil || !strings.Contains(err.Error(), "OPENSSH PRIVATE KEY") {
		t.Errorf("err = %v", err)
	}
}
