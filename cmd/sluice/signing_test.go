package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net/http"
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

// `sluice hydrate --trusted-keys` checks spec.source.verify: a tag signed
// by git with a trusted key renders (mode Tag); its unsigned commit does
// not (TagAndHEAD); a lightweight tag cannot be signed.
func TestHydrateVerifiesSignedTags(t *testing.T) {
	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{"k/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("unsigned")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(t.TempDir(), "id")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	pub, _ := ssh.NewPublicKey(priv.Public())
	trusted := filepath.Join(t.TempDir(), "allowed_signers")
	os.WriteFile(trusted, []byte("test@example.com "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))+"\n"), 0o644)
	testenv.Git(t, w.Dir, "-c", "gpg.format=ssh", "-c", "user.signingkey="+keyFile, "tag", "-s", "-m", "release", "v1")
	testenv.Git(t, w.Dir, "tag", "v0")
	testenv.Git(t, w.Dir, "push", "-q", "origin", "main", "v1", "v0")
	dst := srv.CreateRepo(t, "deploy")
	syncs := t.TempDir()
	sync := func(name, ref, mode string) {
		y := "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: " + name + "}\nspec:\n  source: {repo: " + app + ", ref: " + ref + ", path: k, verify: {mode: " + mode + ", secretRef: {name: keys}}}\n  destination: {repo: " + dst + ", branch: env/dev, path: apps/" + name + "}\n"
		os.WriteFile(filepath.Join(syncs, name+".yaml"), []byte(y), 0o644)
	}
	sync("tagged", "v1", "Tag")
	sync("both", "v1", "TagAndHEAD")
	sync("light", "v0", "Tag")
	out, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", t.TempDir(), "--trusted-keys", trusted)
	if code == 0 || !strings.Contains(out+stderr, "tagged committed") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"both", "spec.source.verify: commit", "it is not signed", "light", "lightweight tag"} {
		if !strings.Contains(out+stderr, want) {
			t.Errorf("the output lacks %q:\n%s%s", want, out, stderr)
		}
	}
	// Without trusted keys, a sync that asks for verification fails.
	if out, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", t.TempDir(), "--sync", "tagged"); code == 0 || !strings.Contains(out+stderr, "no trusted keys") {
		t.Errorf("no --trusted-keys: exit %d\n%s%s", code, out, stderr)
	}
}

// Against a real Gitea whose deploy branch requires signed commits: an
// unsigned hydration is refused by the forge, a signed one lands and
// Gitea shows it verified.
func TestAProtectedBranchThatRequiresSignedCommitsTakesSignedHydrations(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	keyFile := filepath.Join(t.TempDir(), "identity")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	pub, _ := ssh.NewPublicKey(priv.Public())
	g := testenv.StartGiteaWith(t, "[repository.signing]\nTRUSTED_SSH_KEYS = "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))+"\n")
	dst := g.CreateRepo(t, "deploy")
	d := testenv.NewWork(t, g.PushURL(dst))
	d.Write(map[string]string{"README.md": "deploy\n"}).Commit("init")
	d.Push("main")
	g.API(t, http.MethodPost, "repos/"+g.User+"/deploy/branch_protections", map[string]any{
		"rule_name": "main", "enable_push": true, "require_signed_commits": true,
	}, nil)

	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{"k/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("init")
	w.Push("main")
	syncs := t.TempDir()
	os.WriteFile(filepath.Join(syncs, "web.yaml"), []byte("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: web}\nspec:\n  source: {repo: "+app+", path: k}\n  destination: {repo: "+g.PushURL(dst)+", branch: main, path: apps/web}\n"), 0o644)
	cache := t.TempDir()

	before := g.Head(t, dst, "main")
	out, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache)
	if code == 0 || g.Head(t, dst, "main") != before || !strings.Contains(out+stderr, "require signed commits: sign with --signing-key") {
		t.Fatalf("an unsigned hydration of a branch requiring signed commits: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--signing-key", keyFile); code != 0 {
		t.Fatalf("a signed hydration: exit %d\n%s", code, stderr)
	}
	head := g.Head(t, dst, "main")
	var commit struct {
		Commit struct {
			Verification struct {
				Verified bool   `json:"verified"`
				Reason   string `json:"reason"`
			} `json:"verification"`
		} `json:"commit"`
	}
	g.API(t, http.MethodGet, "repos/"+g.User+"/deploy/git/commits/"+head, nil, &commit)
	if head == before || !commit.Commit.Verification.Verified {
		t.Errorf("the signed hydration %s: verified %v (%s)", head, commit.Commit.Verification.Verified, commit.Commit.Verification.Reason)
	}
}
