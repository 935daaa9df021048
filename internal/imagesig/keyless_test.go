package imagesig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

const (
	ghIssuer   = "https://token.actions.githubusercontent.com"
	ghWorkflow = "https://github.com/team/web/.github/workflows/release.yml@refs/heads/main"
)

func TestKeylessSignatures(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	ctx := context.Background()
	ss := testenv.NewSigstore(t)
	root, err := ParseTrustedRoot(ss.TrustedRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	id := func(issuer, issuerRE, subject, subjectRE string) *Identity {
		t.Helper()
		i, err := NewIdentity(issuer, issuerRE, subject, subjectRE)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	workflow := id(ghIssuer, "", ghWorkflow, "")
	otherStore := testenv.NewSigstore(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	cases := []struct {
		name     string
		sign     func(digest string)
		identity *Identity
		want     string // the signer recorded, or the error's words
		ok       bool
	}{
		{"the workflow trusted", func(d string) { ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow}) },
			workflow, "keyless, " + ghWorkflow + " (issuer " + ghIssuer + ")", true},
		{"an e-mail identity", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: "https://accounts.google.com", Subject: "ci@example.com"})
		},
			id("https://accounts.google.com", "", "ci@example.com", ""), "keyless, ci@example.com", true},
		{"by regular expressions", func(d string) { ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow}) },
			id("", `https://token\.actions\.githubusercontent\.com`, "", `https://github\.com/team/.*@refs/heads/main`), "keyless, " + ghWorkflow, true},
		{"signed two hours ago: the certificate has expired but was valid when logged", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, IssuedAt: time.Now().Add(-2 * time.Hour)})
		}, workflow, "keyless, " + ghWorkflow, true},
		{"a regular expression is anchored", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow + "x"})
		},
			id(ghIssuer, "", "", `https://github\.com/team/web/.*@refs/heads/main`), "not the identity trusted", false},
		{"another workflow", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: "https://github.com/fork/web/.github/workflows/release.yml@refs/heads/main"})
		}, workflow, "one by https://github.com/fork/web/.github/workflows/release.yml@refs/heads/main (issuer " + ghIssuer + "), not the identity trusted", false},
		{"another issuer", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: "https://evil.example.com", Subject: ghWorkflow})
		},
			workflow, "issued by https://evil.example.com, not the issuer trusted", false},
		{"no Rekor bundle", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, NoBundle: true})
		},
			workflow, "without a Rekor bundle", false},
		{"a log promise for another entry", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, BadSET: true})
		},
			workflow, "does not carry a valid signed entry timestamp", false},
		{"the genuine log entry of another signature, replayed", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, OtherEntry: true})
		},
			workflow, "records another", false},
		{"a signature that does not verify with its certificate", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, WrongKey: true})
		},
			workflow, "does not verify with its certificate", false},
		{"a certificate expired when the log recorded the signature", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, IssuedAt: time.Now().Add(-2 * time.Hour), LoggedAt: time.Now()})
		}, workflow, "certificate has expired", false},
		{"an entry from a log the root does not list", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, LogOf: otherStore})
		}, workflow, "which the trusted root does not list", false},
		{"a certificate never logged for transparency", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, NoSCT: true})
		},
			workflow, "carries no signed certificate timestamp", false},
		{"another Sigstore instance", func(d string) {
			otherStore.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow})
		},
			workflow, "which the trusted root does not list", false},
		{"signed with a key, not keylessly", func(d string) { testenv.CosignSign(t, reg, "team/web", d, d, key) },
			workflow, "one without a certificate", false},
		{"a signature moved from another digest", func(d string) {
			other := reg.Push(t, "team/web:elsewhere")
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, SignedDigest: other})
		}, workflow, "one for sha256:", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := reg.Push(t, "team/web:v"+strconv.Itoa(i))
			tc.sign(d)
			by, err := VerifyCosign(ctx, c, reg.Host+"/team/web", d, &Policy{Identity: tc.identity, Root: root})
			wantVerified(t, by, err, tc.want, tc.ok)
		})
	}

	// The public instance's root does not trust the test instance.
	d := reg.Push(t, "team/web:public")
	ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow})
	if _, err := VerifyCosign(ctx, c, reg.Host+"/team/web", d, &Policy{Identity: workflow}); err == nil || !strings.Contains(err.Error(), "does not list") {
		t.Errorf("verified by the public instance's root: %v", err)
	}
}

func TestIdentitiesAndRootsAreChecked(t *testing.T) {
	for _, tc := range []struct{ issuer, issuerRE, subject, subjectRE, want string }{
		{"", "", "a@b", "", "one of issuer, issuerRegExp"},
		{"i", "j", "a@b", "", "one of issuer, issuerRegExp"},
		{"i", "", "", "", "one of subject, subjectRegExp"},
		{"i", "", "", "(", "subjectRegExp"},
	} {
		if _, err := NewIdentity(tc.issuer, tc.issuerRE, tc.subject, tc.subjectRE); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	for _, tc := range []struct{ data, want string }{
		{"nope", "not a Sigstore trusted_root.json"},
		{`{"tlogs":[]}`, "at least one certificate authority"},
		{`{"tlogs":[{"baseUrl":"x","publicKey":{"rawBytes":"AAAA"}}]}`, "tlogs[0] (x): public key"},
	} {
		if _, err := ParseTrustedRoot([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.data, err)
		}
	}
	if PublicGood() == nil || len(PublicGood().cas) < 2 || len(PublicGood().ctlogs) < 2 {
		t.Error("the public instance's root is not read whole")
	}
}

// A bundle signed on Sigstore's public instance (a GitHub Actions
// workflow of sigstore-js) checks out under the embedded public root
// part by part: the Rekor promise, the certificate chain at the time
// logged, its certificate transparency timestamp, the identity and the
// signature; a bit changed anywhere does not.
func TestARealPublicSigstoreBundleVerifies(t *testing.T) {
	data, err := os.ReadFile("testdata/sigstore-go/bundle-provenance.json")
	if err != nil {
		t.Fatal(err)
	}
	var b sigBundle // the reader's own parse: a bundle is read as verifyBundle reads it
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	root := PublicGood()
	e := b.VerificationMaterial.TlogEntries[0]
	index, integrated := e.LogIndex, e.IntegratedTime
	body := base64.StdEncoding.EncodeToString(e.CanonicalizedBody)
	logID := hex.EncodeToString(e.LogID.KeyID)
	set := e.InclusionPromise.SignedEntryTimestamp
	at, err := root.verifySET(body, integrated, index, logID, set)
	if err != nil {
		t.Fatalf("the Rekor promise: %v", err)
	}
	if _, err := root.verifySET(body, integrated, index+1, logID, set); err == nil {
		t.Error("a promise for another index verified")
	}
	if _, err := root.verifySET(body, integrated+1, index, logID, set); err == nil {
		t.Error("a promise for another time verified")
	}

	var chain []*x509.Certificate
	for _, c := range b.VerificationMaterial.X509CertificateChain.Certificates {
		cert, err := x509.ParseCertificate(c.RawBytes)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, cert)
	}
	leaf := chain[0]
	issuer, err := root.verifyChain(leaf, nil, at)
	if err != nil {
		t.Fatalf("the certificate chain at %s: %v", at, err)
	}
	if _, err := root.verifyChain(leaf, nil, at.Add(time.Hour)); err == nil {
		t.Error("the ten-minute certificate verified an hour after it was logged")
	}
	if err := root.verifySCT(leaf, issuer); err != nil {
		t.Fatalf("the certificate's SCT: %v", err)
	}
	if err := root.verifySCT(leaf, chain[len(chain)-1]); err == nil {
		t.Error("the SCT verified for another issuer")
	}
	iss, subjects := certIdentity(leaf)
	if iss != ghIssuer || len(subjects) != 1 || subjects[0] != "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main" {
		t.Errorf("identity %q %q", iss, subjects)
	}

	// The signature is a DSSE envelope's (signed over its PAE).
	env := b.DSSEEnvelope
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(env.PayloadType), env.PayloadType, len(env.Payload), env.Payload)
	if !verifiedBy(Keys{leaf.PublicKey}, pae, env.Signatures[0].Sig) {
		t.Error("the envelope's signature does not verify with the certificate")
	}
	pae[len(pae)-1] ^= 1
	if verifiedBy(Keys{leaf.PublicKey}, pae, env.Signatures[0].Sig) {
		t.Error("a changed envelope verified")
	}
}

// The cost of checking one signature layer, keyless (certificate chain,
// SCT, Rekor promise and entry) against key-based, without the registry.
func BenchmarkSignatureCheck(b *testing.B) {
	reg := testenv.NewRegistry(b)
	ss := testenv.NewSigstore(b)
	root, err := ParseTrustedRoot(ss.TrustedRoot(b))
	if err != nil {
		b.Fatal(err)
	}
	d := reg.Push(b, "team/web:v1")
	ss.Sign(b, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow})
	c := registry.New()
	ref, _ := c.ParseReference(reg.Host + "/team/web:sha256-" + strings.TrimPrefix(d, "sha256:") + ".sig")
	img, err := c.Image(context.Background(), ref)
	if err != nil {
		b.Fatal(err)
	}
	m, _ := img.Manifest()
	layers, _ := img.Layers()
	rc, _ := layers[0].Compressed()
	data := make([]byte, m.Layers[0].Size)
	if _, err := io.ReadFull(rc, data); err != nil {
		b.Fatal(err)
	}
	ann := m.Layers[0].Annotations
	sig, _ := base64.StdEncoding.DecodeString(ann[SignatureAnnotation])
	id, _ := NewIdentity(ghIssuer, "", ghWorkflow, "")
	b.Run("keyless", func(b *testing.B) {
		for b.Loop() {
			if _, err := verifyKeyless(root, id, ann, data, sig); err != nil {
				b.Fatal(err)
			}
		}
	})
	block, _ := pem.Decode([]byte(ann[CertificateAnnotation]))
	cert, _ := x509.ParseCertificate(block.Bytes)
	keys := Keys{cert.PublicKey}
	b.Run("key", func(b *testing.B) {
		for b.Loop() {
			if !verifiedBy(keys, data, sig) {
				b.Fatal("no")
			}
		}
	})
}

// cosign 3 attaches a Sigstore bundle as an OCI referrer instead of the
// .sig tag: the same checks hold.
func TestCosign3Bundles(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	ctx := context.Background()
	ss := testenv.NewSigstore(t)
	root, err := ParseTrustedRoot(ss.TrustedRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	workflow, _ := NewIdentity(ghIssuer, "", ghWorkflow, "")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys, _ := ParseKeys(testenv.CosignPublicKey(t, key))
	keyless := &Policy{Identity: workflow, Root: root}
	keyed := &Policy{Keys: keys, Name: "key of Secret ci"}
	ci := testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow}
	cases := []struct {
		name string
		sign func(digest string)
		pol  *Policy
		want string
		ok   bool
	}{
		{"keyless, the workflow trusted", func(d string) { ss.SignBundle(t, reg, "team/web", d, ci) }, keyless, "keyless, " + ghWorkflow, true},
		{"with a key", func(d string) { testenv.CosignSignBundle(t, reg, "team/web", d, d, key) }, keyed, "key of Secret ci", true},
		{"another workflow", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: "https://github.com/fork/web/.github/workflows/release.yml@refs/heads/main"})
		}, keyless, "a bundle by https://github.com/fork/web/", false},
		{"no log entry", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, NoBundle: true})
		}, keyless, "without a transparency log entry", false},
		{"a log promise for another entry", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, BadSET: true})
		}, keyless, "valid signed entry timestamp", false},
		{"the genuine log entry of another statement, replayed", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, OtherEntry: true})
		}, keyless, "records another", false},
		{"a signature that does not verify with its certificate", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, WrongKey: true})
		}, keyless, "does not verify", false},
		{"a certificate expired when the log recorded the statement", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, IssuedAt: time.Now().Add(-2 * time.Hour), LoggedAt: time.Now()})
		}, keyless, "certificate has expired", false},
		{"an entry from a log the root does not list", func(d string) {
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, LogOf: testenv.NewSigstore(t)})
		}, keyless, "which the trusted root does not list", false},
		{"signed with a key, checked keylessly", func(d string) { testenv.CosignSignBundle(t, reg, "team/web", d, d, key) }, keyless, "without a certificate", false},
		{"by another key", func(d string) { ss.SignBundle(t, reg, "team/web", d, ci) }, keyed, "a bundle by another key", false},
		{"a statement of another digest", func(d string) {
			other := reg.Push(t, "team/web:elsewhere")
			ss.SignBundle(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, SignedDigest: other})
		}, keyless, "a bundle for sha256:", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := reg.Push(t, "team/web:b"+strconv.Itoa(i))
			tc.sign(d)
			by, err := VerifyCosign(ctx, c, reg.Host+"/team/web", d, tc.pol)
			wantVerified(t, by, err, tc.want, tc.ok)
		})
	}
}

// The real public bundle (an intoto entry with a certificate chain)
// passes verifyBundle whole under the public root and the workflow's
// identity; its statement is SLSA provenance, not an image signature.
func TestARealPublicBundleVerifiesWhole(t *testing.T) {
	data, err := os.ReadFile("testdata/sigstore-go/bundle-provenance.json")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := NewIdentity(ghIssuer, "", "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main", "")
	payload, by, err := verifyBundle(&Policy{Identity: id}, data)
	if err != nil || by != "keyless, https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main (issuer "+ghIssuer+")" {
		t.Fatalf("%q, %v", by, err)
	}
	if err := imageStatement(payload, "sha256:00"); err == nil || !strings.Contains(err.Error(), "of an attestation (https://slsa.dev/provenance/") {
		t.Errorf("the statement: %v", err)
	}
	other, _ := NewIdentity(ghIssuer, "", "https://github.com/sigstore/sigstore-js/.github/workflows/other.yml@refs/heads/main", "")
	if _, _, err := verifyBundle(&Policy{Identity: other}, data); err == nil || !strings.Contains(err.Error(), "not the identity trusted") {
		t.Errorf("another identity: %v", err)
	}
	tampered := strings.Replace(string(data), `"integratedTime":"1681839912"`, `"integratedTime":"1681839913"`, 1)
	if tampered == string(data) {
		t.Fatal("the fixture changed")
	}
	if _, _, err := verifyBundle(&Policy{Identity: id}, []byte(tampered)); err == nil || !strings.Contains(err.Error(), "signed entry timestamp") {
		t.Errorf("a changed log time: %v", err)
	}
}

// wantVerified checks a verification's outcome: verified by a signer
// whose description holds want (ok), or refused with an error saying
// want.
func wantVerified(t *testing.T, by string, err error, want string, ok bool) {
	t.Helper()
	if ok {
		if err != nil || !strings.Contains(by, want) {
			t.Fatalf("got %q, %v; want %q", by, err, want)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q, %v; want an error saying %q", by, err, want)
	}
}
