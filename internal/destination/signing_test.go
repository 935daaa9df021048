package destination

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// Every kind of commit the destination makes is signed when a signer is
// given: a push and a pull request's head, each verified by git.
func TestCommitsAreSignedWhenASignerIsGiven(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "deploy")
	base := testenv.NewWork(t, url)
	base.Write(map[string]string{"README.md": "hi\n"}).Commit("init")
	base.Push("main")
	loc, _ := source.ParseLocation(url, "")
	repo, err := source.NewCache(t.TempDir()).Open(ctx, loc, source.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	signer, err := signing.Parse(pem.EncodeToMemory(block), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := ssh.NewPublicKey(priv.Public())
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	os.WriteFile(allowed, []byte("sluice@sluice.dev "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))+"\n"), 0o644)
	folder := Folder{v1alpha1.ProvenanceFile: []byte("sync: web\n"), "a.yaml": []byte("a: 1\n")}

	if _, err := Write(ctx, repo, "main", []Change{{Path: "apps/web", Files: folder}}, WriteOptions{Message: "hydrate", Signer: signer}); err != nil {
		t.Fatal(err)
	}
	if _, err := Propose(ctx, repo, "main", "sluice/pr/main", []Change{{Path: "apps/api", Files: folder}}, WriteOptions{Message: "proposal", Signer: signer}); err != nil {
		t.Fatal(err)
	}
	bare := srv.Root + "/deploy.git"
	for _, ref := range []string{"main", "sluice/pr/main"} {
		cmd := exec.Command("git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", ref)
		cmd.Dir = bare
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `Good "git" signature`) {
			t.Errorf("git verify-commit %s: %v\n%s", ref, err, out)
		}
	}
	// The first commit, pushed by a person, is not: the check can fail.
	cmd := exec.Command("git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", "main~1")
	cmd.Dir = bare
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("an unsigned commit verified:\n%s", out)
	}
}
