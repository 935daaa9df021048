package imagesig

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/verify"

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
			workflow, "not enough verified log entries", false},
		{"the genuine log entry of another signature, replayed", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, OtherEntry: true})
		},
			workflow, "transparency log signature does not match", false},
		{"a signature that does not verify with its certificate", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, WrongKey: true})
		},
			workflow, "invalid signature", false},
		{"a certificate expired when the log recorded the signature", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, IssuedAt: time.Now().Add(-2 * time.Hour), LoggedAt: time.Now()})
		}, workflow, "integrated time outside certificate validity", false},
		{"an entry from a log the root does not list", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, LogOf: otherStore})
		}, workflow, "which the trusted root does not list", false},
		{"a certificate never logged for transparency", func(d string) {
			ss.Sign(t, reg, "team/web", d, testenv.Keyless{Issuer: ghIssuer, Subject: ghWorkflow, NoSCT: true})
		},
			workflow, "0 SCT entries", false},
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
		{`{"tlogs":[]}`, "unsupported TrustedRoot media type"},
		{`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1","tlogs":[]}`, "at least one certificate authority"},
		{`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1","tlogs":[{"baseUrl":"x","publicKey":{"rawBytes":"AAAA"}}]}`, "not a Sigstore trusted_root.json"},
	} {
		if _, err := ParseTrustedRoot([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.data, err)
		}
	}
	if pg := PublicGood().material; len(pg.FulcioCertificateAuthorities()) < 2 || len(pg.CTLogs()) < 2 || len(pg.RekorLogs()) < 1 {
		t.Error("the public instance's root is not read whole")
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
	keyless := &Policy{Identity: id, Root: root}
	b.Run("keyless", func(b *testing.B) {
		for b.Loop() {
			e, err := legacyEntity(ann, data, sig, true)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := keyless.verifyEntity(e, func() verify.ArtifactPolicyOption { return verify.WithArtifact(bytes.NewReader(data)) }); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same layer checked with its certificate's key, as a key-based
	// signature is: the signature alone.
	block, _ := pem.Decode([]byte(ann[CertificateAnnotation]))
	cert, _ := x509.ParseCertificate(block.Bytes)
	keyed := &Policy{Keys: Keys{cert.PublicKey}, Name: "k"}
	plain := map[string]string{}
	b.Run("key", func(b *testing.B) {
		for b.Loop() {
			e, err := legacyEntity(plain, data, sig, false)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := keyed.verifyEntity(e, func() verify.ArtifactPolicyOption { return verify.WithArtifact(bytes.NewReader(data)) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cosign 3 attaches a Sigstore bundle as an OCI referrer instead of the
// .sig tag. Signed on a test Sigstore of sigstore-go's own testing
// package (a Fulcio CA, a Rekor log of v1 and v2 entries with inclusion
// proofs, a timestamp authority), each bundle is verified whole and each
// fault refused.
func TestCosign3Bundles(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	ctx := context.Background()
	vs := testenv.NewVirtualSigstore(t)
	root, err := ParseTrustedRoot(vs.TrustedRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	const signer = "release@team.example"
	trusted, _ := NewIdentity(ghIssuer, "", signer, "")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys, _ := ParseKeys(testenv.CosignPublicKey(t, key))
	keyless := &Policy{Identity: trusted, Root: root}
	keyed := &Policy{Keys: keys, Name: "key of Secret ci"}
	ok := testenv.BundleOptions{Identity: signer, Issuer: ghIssuer}
	with := func(f func(*testenv.BundleOptions)) testenv.BundleOptions {
		o := ok
		f(&o)
		return o
	}
	cases := []struct {
		name string
		sign func(digest string)
		pol  *Policy
		want string
		ok   bool
	}{
		{"keyless, a Rekor v1 entry", func(d string) { vs.SignBundle(t, reg, "team/web", d, ok) }, keyless, "keyless, " + signer, true},
		{"keyless, a Rekor v2 entry and a timestamp", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.RekorV2 = true }))
		}, keyless, "keyless, " + signer, true},
		{"with a key", func(d string) { testenv.CosignSignBundle(t, reg, "team/web", d, d, key) }, keyed, "key of Secret ci", true},
		{"another signer", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.Identity = "mallory@team.example" }))
		}, keyless, "a bundle by mallory@team.example (issuer " + ghIssuer + "), not the identity trusted", false},
		{"another issuer", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.Issuer = "https://evil.example.com" }))
		}, keyless, "issued by https://evil.example.com, not the issuer trusted", false},
		{"no log entry", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.NoEntry = true }))
		}, keyless, "not enough verified log entries", false},
		{"an inclusion proof of another tree", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.BadProof = true }))
		}, keyless, "calculated root", false},
		{"an inclusion proof of another tree, Rekor v2", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.BadProof = true; o.RekorV2 = true }))
		}, keyless, "unverified checkpoint signature", false},
		{"the genuine log entry of another statement, replayed", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.OtherEntry = true }))
		}, keyless, "transparency log signature does not match", false},
		{"the genuine log entry of another statement, replayed, Rekor v2", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.OtherEntry = true; o.RekorV2 = true }))
		}, keyless, "verifying inclusion", false},
		{"a signature that does not verify with its certificate", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.WrongSignature = true }))
		}, keyless, "transparency log signature does not match", false},
		{"a certificate expired when the log recorded the statement", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.LoggedAt = time.Now().Add(30 * time.Minute) }))
		}, keyless, "integrated time outside certificate validity", false},
		{"an entry from a log the root does not list", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.LogOf = testenv.NewVirtualSigstore(t) }))
		}, keyless, "which the trusted root does not list", false},
		{"another Sigstore instance", func(d string) { testenv.NewVirtualSigstore(t).SignBundle(t, reg, "team/web", d, ok) }, keyless, "which the trusted root does not list", false},
		{"signed with a key, checked keylessly", func(d string) { testenv.CosignSignBundle(t, reg, "team/web", d, d, key) }, keyless, "without a certificate", false},
		{"keyless, checked with a key", func(d string) { vs.SignBundle(t, reg, "team/web", d, ok) }, keyed, "a bundle by another key", false},
		{"by another key", func(d string) {
			other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			testenv.CosignSignBundle(t, reg, "team/web", d, d, other)
		}, keyed, "a bundle by another key", false},
		{"a statement of another digest", func(d string) {
			other := reg.Push(t, "team/web:elsewhere")
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.SignedDigest = other }))
		}, keyless, "a bundle for sha256:", false},
		{"an attestation, not a signature", func(d string) {
			vs.SignBundle(t, reg, "team/web", d, with(func(o *testenv.BundleOptions) { o.PredicateType = "https://slsa.dev/provenance/v1" }))
		}, keyless, "of an attestation (https://slsa.dev/provenance/v1)", false},
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

// The real public bundle (an intoto entry with a certificate chain,
// signed on Sigstore's public instance by a GitHub Actions workflow of
// sigstore-js) verifies whole under the embedded public root and the
// workflow's identity, for its statement's subject; its statement is
// SLSA provenance, not an image signature; another identity, another
// subject, and a log time changed by a second do not verify.
func TestARealPublicBundleVerifiesWhole(t *testing.T) {
	data, err := os.ReadFile("testdata/sigstore-go/bundle-provenance.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundleEntity(data)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Subject []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if err := json.Unmarshal(b.GetDsseEnvelope().GetPayload(), &st); err != nil || len(st.Subject) == 0 {
		t.Fatalf("the statement: %v", err)
	}
	subject, _ := hex.DecodeString(st.Subject[0].Digest["sha512"])
	if len(subject) == 0 {
		t.Fatalf("the statement's subject: %v", st.Subject)
	}
	workflow := "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main"
	id, _ := NewIdentity(ghIssuer, "", workflow, "")
	by, err := (&Policy{Identity: id}).verifyEntity(b, func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha512", subject) })
	if err != nil || by != "keyless, "+workflow+" (issuer "+ghIssuer+")" {
		t.Fatalf("%q, %v", by, err)
	}
	if _, err := verifyBundle(&Policy{Identity: id}, data, "sha256:"+strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "of an attestation (https://slsa.dev/provenance/") {
		t.Errorf("as an image's signature: %v", err)
	}
	other, _ := NewIdentity(ghIssuer, "", "https://github.com/sigstore/sigstore-js/.github/workflows/other.yml@refs/heads/main", "")
	if _, err := (&Policy{Identity: other}).verifyEntity(b, func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha512", subject) }); err == nil || !strings.Contains(err.Error(), "not the identity trusted") {
		t.Errorf("another identity: %v", err)
	}
	wrong := append([]byte(nil), subject...)
	wrong[0] ^= 1
	if _, err := (&Policy{Identity: id}).verifyEntity(b, func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha512", wrong) }); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("another subject: %v", err)
	}
	tampered := strings.Replace(string(data), `"integratedTime":"1681839912"`, `"integratedTime":"1681839913"`, 1)
	if tampered == string(data) {
		t.Fatal("the fixture changed")
	}
	tb, err := bundleEntity([]byte(tampered))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Policy{Identity: id}).verifyEntity(tb, func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha512", subject) }); err == nil || !strings.Contains(err.Error(), "does not verify") {
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

// A registry whose referrers API names a bundle's artifact type by its
// config's media type (OCI's empty config, as cosign 3 writes it), not
// the manifest's own artifactType: the bundle is still found, by reading
// the manifest; a referrer that is no bundle is not taken for one.
func TestABundleIsFoundWhereTheReferrersAPIReportsTheConfigType(t *testing.T) {
	reg := testenv.NewRegistryWithReferrers(t)
	c := registry.New()
	vs := testenv.NewVirtualSigstore(t)
	root, err := ParseTrustedRoot(vs.TrustedRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	const signer = "release@team.example"
	id, _ := NewIdentity(ghIssuer, "", signer, "")
	d := reg.Push(t, "team/web:v1")
	vs.SignBundle(t, reg, "team/web", d, testenv.BundleOptions{Identity: signer, Issuer: ghIssuer})
	descs, err := c.Referrers(context.Background(), reg.Host+"/team/web", d, BundleArtifactType)
	if err != nil || len(descs) != 1 {
		t.Fatalf("referrers of type %s: %v, %v", BundleArtifactType, descs, err)
	}
	by, err := VerifyCosign(context.Background(), c, reg.Host+"/team/web", d, &Policy{Identity: id, Root: root})
	wantVerified(t, by, err, "keyless, "+signer, true)

	// An SBOM-like referrer of the same empty config is not a bundle.
	other := reg.Push(t, "team/web:v2")
	testenv.PushReferrer(t, reg, "team/web", other, "application/spdx+json", []byte(`{"spdxVersion":"SPDX-2.3"}`))
	if descs, err := c.Referrers(context.Background(), reg.Host+"/team/web", other, BundleArtifactType); err != nil || len(descs) != 0 {
		t.Errorf("an SBOM taken for a bundle: %v, %v", descs, err)
	}
}
