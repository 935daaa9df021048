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
	payload, signature, _ = gitSignedIn(t, env, config...)
	return payload, signature
}

// gitSignedIn is gitSigned, saying the repository too.
func gitSignedIn(t *testing.T, env []string, config ...string) (payload []byte, signature, dir string) {
	t.Helper()
	dir = t.TempDir()
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
	return payload, c.PGPSignature, dir
}

func TestCommitsSignedByGitWithAnSSHKeyVerify(t *testing.T) {
	keyFile, pub, authorized := sshKeyFile(t)
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

// An allowed signer's options are held to git's own check: for each
// line, `git verify-commit` / `git verify-tag` (ssh-keygen -Y verify, at
// the committer's or tagger's time) and Sluice accept or refuse the same
// object, signed by git at 2026-06-01 12:00 UTC. The other dates the
// objects carry are a year and a half earlier (the commit's author; the
// tagged commit's committer), so that reading the wrong date refuses
// what git accepts.
func TestAllowedSignersOptionsAsGitVerifyCommitReadsThem(t *testing.T) {
	keyFile, _, key := sshKeyFile(t)
	const earlier, signed = "2025-01-15T12:00:00Z", "2026-06-01T12:00:00Z"
	commitEnv := []string{"GIT_COMMITTER_DATE=" + signed, "GIT_AUTHOR_DATE=" + earlier, "TZ=UTC"}
	commitPayload, commitSig, commitDir := gitSignedIn(t, commitEnv, "gpg.format=ssh", "user.signingkey="+keyFile)
	tagPayload, tagSig, tagDir := gitSignedTag(t, keyFile, earlier, signed)
	for _, object := range []struct {
		verify, dir  string
		payload, sig []byte
	}{
		{"verify-commit", commitDir, commitPayload, []byte(commitSig)},
		{"verify-tag", tagDir, tagPayload, tagSig},
	} {
		for _, tc := range []struct {
			name, lines string
			ok          bool
		}{
			{"no options", "dev@example.com " + key, true},
			{"namespaces git", `dev@example.com namespaces="git" ` + key, true},
			{"namespaces file only", `dev@example.com namespaces="file" ` + key, false},
			{"namespaces patterns", `dev@example.com namespaces="fi*,g?t" ` + key, true},
			{"valid after the signature", `dev@example.com valid-after="20260602" ` + key, false},
			{"valid before the signature", `dev@example.com valid-before="20260531" ` + key, false},
			{"valid around the signature", `dev@example.com valid-after="20260101",valid-before="20261231" ` + key, true},
			{"valid until an hour before, UTC", `dev@example.com valid-before="202606011100Z" ` + key, false},
			{"valid from an hour before, UTC", `dev@example.com valid-after="202606011100Z" ` + key, true},
			{"valid only around the earlier date", `dev@example.com valid-after="20250101",valid-before="20250201" ` + key, false},
			{"a cert-authority", `dev@example.com cert-authority ` + key, false},
			{"a refusing line and an allowing one", `dev@example.com namespaces="file" ` + key + "\n" + `dev@example.com namespaces="git" ` + key, true},
		} {
			t.Run(object.verify+"/"+tc.name, func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "allowed_signers")
				os.WriteFile(file, []byte(tc.lines+"\n"), 0o644)
				target := "HEAD"
				if object.verify == "verify-tag" {
					target = "v1"
				}
				cmd := exec.Command("git", "-c", "gpg.ssh.allowedSignersFile="+file, object.verify, target)
				cmd.Dir = object.dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+object.dir, "TZ=UTC")
				out, gitErr := cmd.CombinedOutput()
				if (gitErr == nil) != tc.ok {
					t.Fatalf("git %s: %v, want ok %v\n%s", object.verify, gitErr, tc.ok, out)
				}
				v, err := ParseVerifier(map[string][]byte{"allowed_signers": []byte(tc.lines)})
				if err != nil {
					t.Fatal(err)
				}
				who, err := v.Verify(object.payload, string(object.sig))
				if (err == nil) != tc.ok {
					t.Errorf("Sluice: %q, %v; git: %v\n%s", who, err, gitErr, out)
				}
				t.Logf("git: %s; Sluice: %v", strings.TrimSpace(string(out)), err)
			})
		}
	}
}

// gitSignedTag makes a commit at the date earlier and a tag v1 of it
// signed by git (`git tag -s`, SSH) at the date signed, and returns what a
// check reads of the tag.
func gitSignedTag(t *testing.T, keyFile, earlier, signed string) (payload, signature []byte, dir string) {
	t.Helper()
	dir = t.TempDir()
	run := func(date string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + keyFile}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "TZ=UTC",
			"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com",
			"GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(earlier, "init", "-q")
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a: 1\n"), 0o644)
	run(earlier, "add", ".")
	run(earlier, "commit", "-q", "-m", "tagged later")
	run(signed, "tag", "-s", "v1", "-m", "v1")
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Tag("v1")
	if err != nil {
		t.Fatal(err)
	}
	tag, err := repo.TagObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	obj := &plumbing.MemoryObject{}
	if err := tag.EncodeWithoutSignature(obj); err != nil {
		t.Fatal(err)
	}
	r, _ := obj.Reader()
	payload, _ = io.ReadAll(r)
	return payload, []byte(tag.PGPSignature), dir
}

// A signature for another namespace than git's (a file signature of the
// same content, `ssh-keygen -Y sign -n file`) is refused, by ssh-keygen
// verifying as git does and by Sluice.
func TestAnSSHSignatureForAnotherNamespaceIsRefused(t *testing.T) {
	keyFile, _, key := sshKeyFile(t)
	dir := t.TempDir()
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor Dev <dev@example.com> 1780315200 +0000\ncommitter Dev <dev@example.com> 1780315200 +0000\n\nsigned\n")
	cmd := exec.Command("ssh-keygen", "-Y", "sign", "-n", "file", "-f", keyFile)
	cmd.Stdin = strings.NewReader(string(payload))
	sig, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v", err)
	}
	allowed := filepath.Join(dir, "allowed_signers")
	os.WriteFile(allowed, []byte("dev@example.com "+key+"\n"), 0o644)
	sigFile := filepath.Join(dir, "sig")
	os.WriteFile(sigFile, sig, 0o644)
	verify := exec.Command("ssh-keygen", "-Y", "verify", "-n", "git", "-f", allowed, "-I", "dev@example.com", "-s", sigFile)
	verify.Stdin = strings.NewReader(string(payload))
	if out, err := verify.CombinedOutput(); err == nil {
		t.Fatalf("ssh-keygen -Y verify -n git accepted a file signature:\n%s", out)
	}
	v, err := ParseVerifier(map[string][]byte{"allowed_signers": mustRead(t, allowed)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(payload, string(sig)); err == nil || !strings.Contains(err.Error(), `"file", not git`) {
		t.Errorf("Sluice: %v, want a refusal naming the namespace", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sshKeyFile writes a new ed25519 private key for git and ssh-keygen to
// sign with, and returns its file, its public key and that as an
// authorized_keys line.
func sshKeyFile(t *testing.T) (file string, pub ssh.PublicKey, authorized string) {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, _ = ssh.NewPublicKey(priv.Public())
	return file, pub, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}
