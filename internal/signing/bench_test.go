package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"

	"sluice.dev/sluice/internal/testenv"
)

// What signing and verification cost per commit, against `git
// verify-commit` (a process per check, as a CI job runs it), measured in
// the same run:
//
//	go test ./internal/signing -run '^$' -bench . -benchtime 200x
func BenchmarkSigning(b *testing.B) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	sshSigner, err := Parse(pem.EncodeToMemory(block), nil)
	if err != nil {
		b.Fatal(err)
	}
	e, _ := openpgp.NewEntity("Sluice", "", "sluice@sluice.dev", nil)
	pgp := &pgpSigner{entity: e}
	pub, _ := ssh.NewPublicKey(priv.Public())
	allowedLine := "sluice@sluice.dev " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	v, err := ParseVerifier(map[string][]byte{"allowed": []byte(allowedLine + "\n")})
	if err != nil {
		b.Fatal(err)
	}
	pv := &Verifier{pgp: openpgp.EntityList{e}}
	payload := []byte("tree 755c87dba05501a2b80995b8c9953c788805696c\nparent fe7bf06a5c2b4e16a5fd4efebdd37fe7b7998a41\nauthor Sluice <sluice@sluice.dev> 1796369351 +0000\ncommitter Sluice <sluice@sluice.dev> 1796369351 +0000\n\nhydrate 220 syncs\n")
	sshSig, _ := sshSigner.Sign(payload)
	pgpSig, _ := pgp.Sign(payload)

	b.Run("sign/ssh-ed25519", func(b *testing.B) {
		for b.Loop() {
			sshSigner.Sign(payload)
		}
	})
	b.Run("sign/openpgp", func(b *testing.B) {
		for b.Loop() {
			pgp.Sign(payload)
		}
	})
	b.Run("verify/ssh-ed25519", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Verify(payload, sshSig); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify/openpgp", func(b *testing.B) {
		for b.Loop() {
			if _, err := pv.Verify(payload, pgpSig); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline/git-verify-commit-ssh", func(b *testing.B) {
		w := testenv.NewWork(b, "")
		w.Write(map[string]string{"a.yaml": "a: 1\n"}).Commit("init")
		commit := signedCommitB(b, w.Dir, sshSigner)
		allowed := filepath.Join(b.TempDir(), "allowed")
		os.WriteFile(allowed, []byte(allowedLine+"\n"), 0o644)
		b.ResetTimer()
		for b.Loop() {
			cmd := exec.Command("git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", commit)
			cmd.Dir = w.Dir
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
		}
	})
}
