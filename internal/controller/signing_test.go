package controller

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

// A sync whose destination names a signing Secret lands signed commits,
// which git verifies as a protected branch's check would; a Secret that
// holds no key fails the sync, naming it.
func TestASyncSignsItsCommitsWithItsSigningSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	pub, _ := ssh.NewPublicKey(priv.Public())
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "signing", Namespace: e.ns},
		Data: map[string][]byte{"identity": pem.EncodeToMemory(block), "identity.pub": ssh.MarshalAuthorizedKey(pub)}}); err != nil {
		t.Fatal(err)
	}
	e.apply(strings.Replace(webSync, "path: apps/web}", "path: apps/web, signing: {secretRef: {name: signing}}}", 1))
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	os.WriteFile(allowed, []byte("sluice@sluice.dev "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))+"\n"), 0o644)
	cmd := exec.Command("git", "-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", "env/dev")
	cmd.Dir = e.dstDir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), `Good "git" signature for sluice@sluice.dev`) {
		t.Errorf("git verify-commit env/dev: %v\n%s", err, out)
	}

	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: e.ns}, Data: map[string][]byte{"username": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	e.apply(strings.NewReplacer("name: web", "name: api", "path: apps/web}", "path: apps/api, signing: {secretRef: {name: empty}}}").Replace(webSync))
	ms := e.ready("api", metav1.ConditionFalse, 30*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "spec.destination.signing") || !strings.Contains(c.Message, "git.asc") {
		t.Errorf("the sync says: %q", c.Message)
	}
}

// spec.source.verify: a source commit rendered only when signed by a
// trusted key (SSH allowed signers here, signed by git itself); an
// unsigned commit, or one signed by another key, fails the sync with
// reason VerificationFailed, naming the commit and the signer found.
func TestASourceIsRenderedOnlyWhenSignedByATrustedKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	key := func() (string, ssh.PublicKey) {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		block, _ := ssh.MarshalPrivateKey(priv, "")
		f := filepath.Join(t.TempDir(), "id")
		os.WriteFile(f, pem.EncodeToMemory(block), 0o600)
		pub, _ := ssh.NewPublicKey(priv.Public())
		return f, pub
	}
	trustedKey, trusted := key()
	otherKey, other := key()
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "trusted", Namespace: e.ns},
		Data: map[string][]byte{"allowed_signers": []byte("test@example.com " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(trusted))) + "\n")}}); err != nil {
		t.Fatal(err)
	}
	sync := e.apply(strings.Replace(webSync, "path: deploy/web}", "path: deploy/web, verify: {secretRef: {name: trusted}}}", 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	head := e.app.Head()
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if c.Reason != v1alpha1.ReasonVerificationFailed || !strings.Contains(c.Message, "commit "+head[:7]) || !strings.Contains(c.Message, "not signed") || e.tip("env/dev") != "" {
		t.Fatalf("an unsigned source: %s: %s (destination %q)", c.Reason, c.Message, e.tip("env/dev"))
	}

	signedCommit := func(keyFile, msg string) string {
		e.app.Write(map[string]string{"deploy/web/note.txt": msg})
		testenv.Git(t, e.app.Dir, "add", "-A")
		testenv.Git(t, e.app.Dir, "-c", "gpg.format=ssh", "-c", "user.signingkey="+keyFile, "commit", "-q", "-S", "-m", msg)
		e.app.Push("main")
		return e.app.Head()
	}
	signedCommit(trustedKey, "signed")
	e.requestReconcile(sync, time.Now().Format(time.RFC3339Nano))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if ms.Status.Source == nil || !strings.HasPrefix(ms.Status.Source.SignedBy, "test@example.com (SSH "+ssh.FingerprintSHA256(trusted)) {
		t.Errorf("the status says the source was signed by %+v", ms.Status.Source)
	}

	bad := signedCommit(otherKey, "signed by someone else")
	e.requestReconcile(sync, time.Now().Format(time.RFC3339Nano))
	ms = e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c = meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if c.Reason != v1alpha1.ReasonVerificationFailed || !strings.Contains(c.Message, "commit "+bad[:7]) || !strings.Contains(c.Message, ssh.FingerprintSHA256(other)) {
		t.Errorf("a source signed by another key: %s: %s", c.Reason, c.Message)
	}
}

// images[].verify: a digest is pinned only when a cosign signature of the
// trusted key verifies for it; until then the sync fails, saying so, and
// nothing is written.
func TestAnImageIsPinnedOnlyWhenItsCosignSignatureVerifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: e.ns},
		Data: map[string][]byte{"cosign.pub": testenv.CosignPublicKey(t, key)}}); err != nil {
		t.Fatal(err)
	}
	sync := e.apply(strings.Replace(webSync, "images: [{name: REG/team/app}]", "images: [{name: REG/team/app, verify: {provider: cosign, secretRef: {name: cosign}}}]", 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	digest, err := registry.New().Digest(context.Background(), e.reg.Host+"/team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "is not pinned: no cosign signature") || !strings.Contains(c.Message, digest) || e.tip("env/dev") != "" {
		t.Fatalf("an unsigned image: %s (destination %q)", c.Message, e.tip("env/dev"))
	}
	testenv.CosignSign(t, e.reg, "team/app", digest, digest, key)
	e.requestReconcile(sync, time.Now().Format(time.RFC3339Nano))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if len(ms.Status.Images) != 1 || ms.Status.Images[0].Digest != digest || ms.Status.Images[0].Verified != "cosign key of Secret cosign" {
		t.Errorf("pinned %+v, want %s verified", ms.Status.Images, digest)
	}
}

// images[].verify.keyless: a digest is pinned only when a keyless cosign
// signature verifies under the trusted root of a Secret (a private
// Sigstore) and was made by the workflow trusted.
func TestAnImageIsPinnedOnlyWhenAKeylessSignatureOfTheTrustedIdentityVerifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	ss := testenv.NewSigstore(t)
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sigstore", Namespace: e.ns},
		Data: map[string][]byte{"trusted_root.json": ss.TrustedRoot(t)}}); err != nil {
		t.Fatal(err)
	}
	const (
		issuer   = "https://token.actions.githubusercontent.com"
		workflow = "https://github.com/team/app/.github/workflows/release.yml@refs/heads/main"
	)
	digest, err := registry.New().Digest(context.Background(), e.reg.Host+"/team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	ss.Sign(t, e.reg, "team/app", digest, testenv.Keyless{Issuer: issuer, Subject: "https://github.com/fork/app/.github/workflows/release.yml@refs/heads/main"})
	sync := e.apply(strings.Replace(webSync, "images: [{name: REG/team/app}]",
		`images: [{name: REG/team/app, verify: {provider: cosign, keyless: {issuer: "`+issuer+`", subjectRegExp: "https://github\\.com/team/app/.*", trustedRootRef: {name: sigstore}}}}]`, 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "is not pinned: no cosign signature by /https://github\\.com/team/app/.*/") ||
		!strings.Contains(c.Message, "one by https://github.com/fork/app/") || e.tip("env/dev") != "" {
		t.Fatalf("an image signed by a fork's workflow: %s (destination %q)", c.Message, e.tip("env/dev"))
	}
	ss.Sign(t, e.reg, "team/app", digest, testenv.Keyless{Issuer: issuer, Subject: workflow})
	e.requestReconcile(sync, time.Now().Format(time.RFC3339Nano))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	want := "cosign keyless, " + workflow + " (issuer " + issuer + ")"
	if len(ms.Status.Images) != 1 || ms.Status.Images[0].Digest != digest || ms.Status.Images[0].Verified != want {
		t.Errorf("pinned %+v, want %s verified by %s", ms.Status.Images, digest, want)
	}
}

// images[].verify with provider notation: a digest is pinned only when a
// signature the real Notation CLI made verifies under the trust policy
// and certificates of a Secret (as Flux's OCIRepository reads them). The
// policy's level is audit, then permissive, where notation-go itself only
// logs a signer no trust store holds: a signature by one pins nothing
// under either, and the trusted signature added beside it pins.
func TestAnImageIsPinnedOnlyWhenItsNotationSignatureVerifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	ctx := context.Background()
	cli := testenv.NewNotationCLI(t, "sluice.test", "mallory.test")
	policy := func(level string) []byte {
		return []byte(`{"version":"1.0","trustPolicies":[{"name":"app","registryScopes":["` + e.reg.Host + `/team/app"],"signatureVerification":{"level":"` + level + `"},"trustStores":["ca:team"],"trustedIdentities":["*"]}]}`)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "notation", Namespace: e.ns},
		Data: map[string][]byte{"trustpolicy.json": policy("audit"), "team.crt": cli.Certificate(t, "sluice.test")}}
	if err := e.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	sync := e.apply(strings.Replace(webSync, "images: [{name: REG/team/app}]", "images: [{name: REG/team/app, verify: {provider: notation, secretRef: {name: notation}}}]", 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	digest, err := registry.New().Digest(ctx, e.reg.Host+"/team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "is not pinned: no Notation signature") || !strings.Contains(c.Message, digest) || e.tip("env/dev") != "" {
		t.Fatalf("an unsigned image: %s (destination %q)", c.Message, e.tip("env/dev"))
	}
	cli.Sign(t, e.reg, "team/app", digest, "--key", "mallory.test")
	for _, level := range []string{"audit", "permissive"} {
		secret.Data["trustpolicy.json"] = policy(level)
		if err := e.c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		e.requestReconcile(sync, time.Now().Format(time.RFC3339Nano))
		ms = e.ready("web", metav1.ConditionFalse, 30*time.Second)
		if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "does not contain any trusted certificate") || e.tip("env/dev") != "" {
			t.Fatalf("%s: signed by a certificate no trust store holds: %s (destination %q)", level, c.Message, e.tip("env/dev"))
		}
	}
	cli.Sign(t, e.reg, "team/app", digest)
	e.requestReconcile(sync, time.Now().Format(time.RFC3339Nano))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if len(ms.Status.Images) != 1 || ms.Status.Images[0].Digest != digest || !strings.HasPrefix(ms.Status.Images[0].Verified, "notation CN=sluice.test") {
		t.Errorf("pinned %+v, want %s verified by notation", ms.Status.Images, digest)
	}
}
