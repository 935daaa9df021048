package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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

// `sluice hydrate --trusted-root` checks keyless signatures (here a
// cosign 3 bundle) of the images
// whose rule has verify.keyless: the identity comes from the rule, the
// trusted root from the flag (Sigstore's public instance without it).
func TestHydrateVerifiesKeylessImageSignatures(t *testing.T) {
	const workflow = "release@team.example"
	reg, digest, srv, syncs := signedImageSync(t, "{provider: cosign, keyless: {issuer: https://token.actions.githubusercontent.com, subject: \""+workflow+"\"}}")
	ss := testenv.NewVirtualSigstore(t)
	// As cosign 3 signs: a Sigstore bundle referring to the digest (a
	// Rekor v2 entry and a timestamp).
	ss.SignBundle(t, reg, "team/web", digest, testenv.BundleOptions{Issuer: "https://token.actions.githubusercontent.com", Identity: workflow, RekorV2: true})
	root := filepath.Join(t.TempDir(), "trusted_root.json")
	os.WriteFile(root, ss.TrustedRoot(t), 0o644)
	cache := t.TempDir()

	_, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache)
	if code == 0 || !strings.Contains(stderr, "is not pinned: no cosign signature by "+workflow) || !strings.Contains(stderr, "which the trusted root does not list") {
		t.Fatalf("a private instance's signature under the public root: exit %d\n%s", code, stderr)
	}
	out, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--trusted-root", root, "-o", "json")
	if code != 0 {
		t.Fatalf("hydrate --trusted-root: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(out, `"committed"`) {
		t.Errorf("hydrate --trusted-root: %s", out)
	}
	clone := t.TempDir()
	testenv.Git(t, clone, "clone", "-q", "--branch", "env/dev", srv.URL("deploy"), ".")
	deploy, _ := os.ReadFile(filepath.Join(clone, "apps/web/deployment-web.yaml"))
	prov, _ := os.ReadFile(filepath.Join(clone, "apps/web/.sluice.yaml"))
	if !strings.Contains(string(deploy), "@"+digest) || !strings.Contains(string(prov), "verified: cosign keyless, "+workflow) {
		t.Errorf("pinned:\n%s\nprovenance:\n%s", deploy, prov)
	}

	if _, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache, "--trusted-root", syncs); code != 2 || !strings.Contains(stderr, "--trusted-root") {
		t.Errorf("a trusted root that is not one: exit %d\n%s", code, stderr)
	}
}

// `sluice hydrate --notation-trust-policy --notation-cert` pins the
// images whose rule has verify.provider notation only when a signature
// the Notation CLI made verifies under that policy; without the flags it
// says what to give. Under audit and permissive, where notation-go only
// logs a signer no trust store holds, a signature by one pins nothing.
func TestHydrateVerifiesNotationImageSignatures(t *testing.T) {
	reg, digest, srv, syncs := signedImageSync(t, "{provider: notation, secretRef: {name: notation}}")
	cli := testenv.NewNotationCLI(t, "sluice.test", "mallory.test")
	files := t.TempDir()
	policy, cert := filepath.Join(files, "trustpolicy.json"), filepath.Join(files, "team.crt")
	writePolicy := func(level string) {
		os.WriteFile(policy, []byte(`{"version":"1.0","trustPolicies":[{"name":"all","registryScopes":["*"],"signatureVerification":{"level":"`+level+`"},"trustStores":["ca:team"],"trustedIdentities":["*"]}]}`), 0o644)
	}
	writePolicy("strict")
	os.WriteFile(cert, cli.Certificate(t, "sluice.test"), 0o644)
	cache := t.TempDir()

	if _, stderr, code := run(t, "hydrate", "-f", syncs, "--cache-dir", cache); code == 0 || !strings.Contains(stderr, "--notation-trust-policy") {
		t.Fatalf("no trust policy given: exit %d\n%s", code, stderr)
	}
	flags := []string{"hydrate", "-f", syncs, "--cache-dir", cache, "--notation-trust-policy", policy, "--notation-cert", cert}
	if _, stderr, code := run(t, flags...); code == 0 || !strings.Contains(stderr, "is not pinned: no Notation signature") {
		t.Fatalf("an unsigned image: exit %d\n%s", code, stderr)
	}
	cli.Sign(t, reg, "team/web", digest, "--key", "mallory.test")
	for _, level := range []string{"audit", "permissive"} {
		writePolicy(level)
		if _, stderr, code := run(t, flags...); code == 0 || !strings.Contains(stderr, "does not contain any trusted certificate") {
			t.Fatalf("%s: signed by a certificate no trust store holds: exit %d\n%s", level, code, stderr)
		}
	}
	cli.Sign(t, reg, "team/web", digest)
	if out, stderr, code := run(t, append(flags, "-o", "json")...); code != 0 || !strings.Contains(out, `"committed"`) {
		t.Fatalf("a signed image, under permissive: exit %d\n%s\n%s", code, out, stderr)
	}
	clone := t.TempDir()
	testenv.Git(t, clone, "clone", "-q", "--branch", "env/dev", srv.URL("deploy"), ".")
	prov, _ := os.ReadFile(filepath.Join(clone, "apps/web/.sluice.yaml"))
	if !strings.Contains(string(prov), "verified: notation CN=sluice.test") {
		t.Errorf("provenance:\n%s", prov)
	}
}

// signedImageSync is a sync of a kustomization naming one image (pushed,
// its digest returned) whose rule verifies as verify says, writing into
// the repository deploy of srv; syncs is its folder.
func signedImageSync(t *testing.T, verify string) (reg *testenv.Registry, digest string, srv *testenv.GitServer, syncs string) {
	t.Helper()
	reg = testenv.NewRegistry(t)
	digest = reg.Push(t, "team/web:v1")
	srv = testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{
		"k/kustomization.yaml": "resources: [deploy.yaml]\n",
		"k/deploy.yaml":        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: " + reg.Host + "/team/web:v1}]\n",
	}).Commit("init")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")
	syncs = t.TempDir()
	os.WriteFile(filepath.Join(syncs, "web.yaml"), []byte("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: web}\nspec:\n  source: {repo: "+app+", path: k}\n  destination: {repo: "+dst+", branch: env/dev, path: apps/web}\n"+
		"  images:\n  - name: "+reg.Host+"/team/web\n    verify: "+verify+"\n"), 0o644)
	return reg, digest, srv, syncs
}

// Keyless signatures in cosign 2's layout (the signature, the Fulcio
// certificate and chain, and Rekor's signed entry timestamp as
// annotations of the .sig image's layer) made by the real cosign CLI
// against the real Fulcio, timestamp authority and Rekor on loopback,
// not by a writer of Sluice's: `sluice hydrate` pins the image they sign
// for the rule's identity, and refuses each tampered variant (another
// identity's certificate, a changed entry timestamp, a changed
// signature), as the real `cosign verify` does.
func TestHydrateVerifiesCosign2KeylessSignaturesTheRealCosignMade(t *testing.T) {
	sig := testenv.StartClusterSigstore(t, cp)
	ns := testenv.Namespace("release")
	identity := sig.Identity(ns, "release")
	reg, digest, srv, syncs := signedImageSync(t, "{provider: cosign, keyless: {issuer: \""+sig.Issuer+"\", subject: \""+identity+"\"}}")
	ref := reg.Host + "/team/web@" + digest
	sign := func(account string) {
		t.Helper()
		token := sig.Token(t, ns, account, "sigstore") // a file, as cosign reads one
		cmd := exec.Command(testenv.CosignBinary(t), "sign", "--yes", "--new-bundle-format=false", "--use-signing-config=false",
			"--fulcio-url", sig.Fulcio.URL, "--rekor-url", sig.Rekor.URL, "--identity-token", token, "--trusted-root", sig.TrustedRoot,
			"--allow-http-registry", "--allow-insecure-registry", ref)
		cmd.Env = append(os.Environ(), "SIGSTORE_ROOT_FILE=", "TUF_ROOT="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cosign sign as %s: %v\n%s", account, err, out)
		}
	}
	sign("release")
	sigTag := reg.Host + "/team/web:sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sig"
	layer := func() map[string]string {
		t.Helper()
		r, err := name.ParseReference(sigTag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(r)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil || len(m.Layers) == 0 {
			t.Fatalf("the signature image: %v, %d layers", err, len(m.Layers))
		}
		return m.Layers[len(m.Layers)-1].Annotations // the newest signature
	}
	real := layer()
	// (No chain annotation here: this Fulcio's CA is a root of its own,
	// with no intermediate.)
	for _, k := range []string{"dev.cosignproject.cosign/signature", "dev.sigstore.cosign/certificate", "dev.sigstore.cosign/bundle"} {
		if real[k] == "" {
			t.Fatalf("cosign wrote no %s: %v", k, real)
		}
	}
	// A new cache each run: nothing verified before is remembered.
	flags := func() []string {
		return []string{"hydrate", "-f", syncs, "--cache-dir", t.TempDir(), "--trusted-root", sig.TrustedRoot, "-o", "json"}
	}
	if _, err := testenv.CosignVerify(t, ref, "", nil, sig.VerifyArgs(identity)...); err != nil {
		t.Fatalf("the real cosign refuses its own signature: %v", err)
	}
	if out, stderr, code := run(t, flags()...); code != 0 {
		t.Fatalf("a cosign 2 keyless signature: exit %d\n%s%s", code, out, stderr)
	}

	// Another identity's certificate and chain over the same layer: the
	// signature no longer matches the certificate's key.
	sign("someone-else")
	other := layer()
	tamper := func(name string, edit func(map[string]string)) {
		t.Helper()
		a := maps.Clone(real)
		edit(a)
		testenv.ReplaceSignatureLayer(t, reg, "team/web", digest, a)
		if _, err := testenv.CosignVerify(t, ref, "", nil, sig.VerifyArgs(identity)...); err == nil {
			t.Fatalf("%s: the real cosign verify accepts it: the variant tampers nothing", name)
		}
		if out, stderr, code := run(t, flags()...); code == 0 || !strings.Contains(out+stderr, "is not pinned") {
			t.Errorf("%s: exit %d\n%s%s", name, code, out, stderr)
		}
	}
	tamper("another identity's certificate", func(a map[string]string) {
		a["dev.sigstore.cosign/certificate"] = other["dev.sigstore.cosign/certificate"]
	})
	tamper("a changed entry timestamp", func(a map[string]string) {
		a["dev.sigstore.cosign/bundle"] = strings.Replace(a["dev.sigstore.cosign/bundle"], `"integratedTime":`, `"integratedTime":1`, 1)
	})
	tamper("a changed signature", func(a map[string]string) {
		s := []byte(a["dev.cosignproject.cosign/signature"])
		s[10] ^= 'A' ^ 'B'
		a["dev.cosignproject.cosign/signature"] = string(s)
	})
	_ = srv
}
