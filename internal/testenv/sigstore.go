package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Sigstore stands in for a private Sigstore instance in tests: a
// certificate authority issuing short-lived signing certificates to OIDC
// identities as Fulcio does (a root and an intermediate), a certificate
// transparency log countersigning each certificate, and a transparency
// log countersigning each signature as Rekor does. Its TrustedRoot is the
// trusted_root.json its operator would publish.
type Sigstore struct {
	rootKey, caKey *ecdsa.PrivateKey
	root, ca       *x509.Certificate
	rekorKey       *ecdsa.PrivateKey
	ctKey          *ecdsa.PrivateKey
	index          atomic.Int64
	serial         atomic.Int64
}

// NewSigstore makes the keys and certificates of a test Sigstore.
func NewSigstore(t TB) *Sigstore {
	t.Helper()
	s := &Sigstore{}
	s.serial.Store(100)
	s.rootKey, s.caKey, s.rekorKey, s.ctKey = ecKey(t), ecKey(t), ecKey(t), ecKey(t)
	start := time.Now().Add(-24 * time.Hour)
	rootT := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{Organization: []string{"sluice.test"}, CommonName: "sigstore"},
		NotBefore: start, NotAfter: start.Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	s.root = createCert(t, rootT, rootT, &s.rootKey.PublicKey, s.rootKey)
	caT := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{Organization: []string{"sluice.test"}, CommonName: "sigstore-intermediate"},
		NotBefore: start, NotAfter: start.Add(5 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	s.ca = createCert(t, caT, s.root, &s.caKey.PublicKey, s.rootKey)
	return s
}

func ecKey(t TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return k
}

func createCert(t TB, tmpl, parent *x509.Certificate, pub any, key *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

func pkixDER(t TB, k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return der
}

// TrustedRoot is the instance's trusted_root.json.
func (s *Sigstore) TrustedRoot(t TB) []byte {
	t.Helper()
	type key struct {
		RawBytes   []byte            `json:"rawBytes"`
		KeyDetails string            `json:"keyDetails"`
		ValidFor   map[string]string `json:"validFor"`
	}
	type log struct {
		BaseURL       string            `json:"baseUrl"`
		HashAlgorithm string            `json:"hashAlgorithm"`
		PublicKey     key               `json:"publicKey"`
		LogID         map[string][]byte `json:"logId"`
	}
	since := map[string]string{"start": s.root.NotBefore.UTC().Format(time.RFC3339)}
	mk := func(url string, k *ecdsa.PrivateKey) log {
		der := pkixDER(t, k)
		id := sha256.Sum256(der)
		return log{url, "SHA2_256", key{der, "PKIX_ECDSA_P256_SHA_256", since}, map[string][]byte{"keyId": id[:]}}
	}
	root := map[string]any{
		"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		"tlogs":     []log{mk("https://rekor.sluice.test", s.rekorKey)},
		"ctlogs":    []log{mk("https://ctfe.sluice.test", s.ctKey)},
		"certificateAuthorities": []map[string]any{{
			"subject":   map[string]string{"organization": "sluice.test", "commonName": "sigstore"},
			"uri":       "https://fulcio.sluice.test",
			"certChain": map[string]any{"certificates": []map[string][]byte{{"rawBytes": s.ca.Raw}, {"rawBytes": s.root.Raw}}},
			"validFor":  since,
		}},
	}
	data, err := json.Marshal(root)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return data
}

// Keyless says how Sigstore.Sign signs; the zero value but for Issuer
// and Subject is what `cosign sign` does.
type Keyless struct {
	Issuer  string // the OIDC issuer in the certificate
	Subject string // an e-mail address, or a URI (a CI workflow's)
	// SignedDigest is the digest the payload names; the digest signed
	// when empty (set to forge a moved signature).
	SignedDigest string
	NoBundle     bool      // as cosign sign --tlog-upload=false
	NoSCT        bool      // a certificate never logged
	BadSET       bool      // the log's promise over another entry
	IssuedAt     time.Time // when the certificate was issued and the entry logged; now when zero
	// OtherEntry attaches the genuine, validly promised log entry of
	// another signature (of another payload, key and certificate): a
	// replay.
	OtherEntry bool
	// WrongKey signs with another key than the certificate's (the entry
	// records what was sent: this signature and that certificate).
	WrongKey bool
	// LoggedAt is when the log says it recorded the entry (IssuedAt when
	// zero): outside the certificate's ten minutes, an expired
	// certificate's signature.
	LoggedAt time.Time
	// LogOf has another instance's log record and promise the entry.
	LogOf *Sigstore
}

// log is the instance whose log records o's entry, and when.
func (s *Sigstore) log(o Keyless, at time.Time) (*Sigstore, time.Time) {
	l := s
	if o.LogOf != nil {
		l = o.LogOf
	}
	if !o.LoggedAt.IsZero() {
		at = o.LoggedAt.Truncate(time.Second)
	}
	return l, at
}

// Sign adds a keyless cosign signature of repo@digest (repo without
// host), laid out as `cosign sign` writes one: the signature in the
// layer's dev.cosignproject.cosign/signature, the certificate and chain
// in dev.sigstore.cosign/certificate and /chain, the log's entry and
// signed entry timestamp in dev.sigstore.cosign/bundle.
func (s *Sigstore) Sign(t TB, reg *Registry, repo, digest string, o Keyless) {
	t.Helper()
	at := o.signing(digest)
	payload := []byte(fmt.Sprintf(`{"critical":{"identity":{"docker-reference":%q},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`, reg.Host+"/"+repo, o.SignedDigest))
	key := ecKey(t)
	cert := s.issue(t, key, o, at)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	h := sha256.Sum256(payload)
	signer := key
	if o.WrongKey {
		signer = ecKey(t)
	}
	sig, err := ecdsa.SignASN1(rand.Reader, signer, h[:])
	if err != nil {
		t.Fatalf("%v", err)
	}
	ann := map[string]string{
		"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig),
		"dev.sigstore.cosign/certificate":    string(certPEM),
		"dev.sigstore.cosign/chain": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.ca.Raw})) +
			string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.root.Raw})),
	}
	if !o.NoBundle {
		l, loggedAt := s.log(o, at)
		ann["dev.sigstore.cosign/bundle"] = l.logEntry(t, payload, sig, certPEM, loggedAt, o.BadSET)
	}
	if o.OtherEntry {
		otherPayload := []byte(strings.Replace(string(payload), `"optional":null`, `"optional":{"another":"signature"}`, 1))
		otherKey := ecKey(t)
		otherCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.issue(t, otherKey, o, at).Raw})
		oh := sha256.Sum256(otherPayload)
		otherSig, err := ecdsa.SignASN1(rand.Reader, otherKey, oh[:])
		if err != nil {
			t.Fatalf("%v", err)
		}
		ann["dev.sigstore.cosign/bundle"] = s.logEntry(t, otherPayload, otherSig, otherCert, at, false)
	}
	appendSignature(t, reg, repo, digest, payload, ann)
}

// issue makes a ten-minute signing certificate for key, as Fulcio does,
// with an embedded signed certificate timestamp of the CT log.
func (s *Sigstore) issue(t TB, key *ecdsa.PrivateKey, o Keyless, at time.Time) *x509.Certificate {
	t.Helper()
	issuerV2, _ := asn1.MarshalWithParams(o.Issuer, "utf8")
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(s.serial.Add(1)),
		NotBefore:    at.Add(-time.Second), NotAfter: at.Add(10 * time.Minute),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}, Value: []byte(o.Issuer)},
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: issuerV2},
		},
	}
	if strings.Contains(o.Subject, "://") {
		u, err := url.Parse(o.Subject)
		if err != nil {
			t.Fatalf("%v", err)
		}
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{o.Subject}
	}
	pre := createCert(t, tmpl, s.ca, &key.PublicKey, s.caKey)
	if o.NoSCT {
		return pre
	}
	// The timestamp signs the certificate as it was before the list of
	// timestamps was added to it (RFC 6962 §3.2).
	ts := uint64(at.UnixMilli())
	issuerHash := sha256.Sum256(s.ca.RawSubjectPublicKeyInfo)
	var signed []byte
	signed = append(signed, 0, 0)
	signed = binary.BigEndian.AppendUint64(signed, ts)
	signed = append(signed, 0, 1)
	signed = append(signed, issuerHash[:]...)
	tbs := pre.RawTBSCertificate
	signed = append(signed, byte(len(tbs)>>16), byte(len(tbs)>>8), byte(len(tbs)))
	signed = append(signed, tbs...)
	signed = append(signed, 0, 0)
	h := sha256.Sum256(signed)
	sig, err := ecdsa.SignASN1(rand.Reader, s.ctKey, h[:])
	if err != nil {
		t.Fatalf("%v", err)
	}
	logID := sha256.Sum256(pkixDER(t, s.ctKey))
	var sct []byte
	sct = append(sct, 0)
	sct = append(sct, logID[:]...)
	sct = binary.BigEndian.AppendUint64(sct, ts)
	sct = append(sct, 0, 0) // no extensions
	sct = append(sct, 4, 3) // sha256, ecdsa
	sct = binary.BigEndian.AppendUint16(sct, uint16(len(sig)))
	sct = append(sct, sig...)
	list := binary.BigEndian.AppendUint16(nil, uint16(len(sct)+2))
	list = binary.BigEndian.AppendUint16(list, uint16(len(sct)))
	list = append(list, sct...)
	ext, _ := asn1.Marshal(list)
	tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}, Value: ext})
	return createCert(t, tmpl, s.ca, &key.PublicKey, s.caKey)
}

// logEntry records a hashedrekord entry of the signature and returns the
// bundle cosign attaches: the entry and the log's signed promise.
func (s *Sigstore) logEntry(t TB, payload, sig, certPEM []byte, at time.Time, bad bool) string {
	t.Helper()
	sum := sha256.Sum256(payload)
	entry := map[string]any{
		"apiVersion": "0.0.1", "kind": "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]string{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
			"signature": map[string]any{"content": sig, "publicKey": map[string][]byte{"content": certPEM}},
		},
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		t.Fatalf("%v", err)
	}
	p, set := s.promise(t, raw, at, bad)
	out, err := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": p})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return string(out)
}

// logPromise is what a transparency log signs of an entry it promises to
// include (Rekor's signed entry timestamp), in canonical JSON order.
type logPromise struct {
	Body           string `json:"body"`
	IntegratedTime int64  `json:"integratedTime"`
	LogID          string `json:"logID"`
	LogIndex       int64  `json:"logIndex"`
}

// promise records entry body in the log at at and signs the log's
// promise of it; bad signs the promise of another entry instead.
func (s *Sigstore) promise(t TB, body []byte, at time.Time, bad bool) (logPromise, []byte) {
	t.Helper()
	logID := sha256.Sum256(pkixDER(t, s.rekorKey))
	p := logPromise{base64.StdEncoding.EncodeToString(body), at.Unix(), hex.EncodeToString(logID[:]), s.index.Add(1)}
	canonical, _ := json.Marshal(p)
	if bad {
		p.LogIndex++ // the promise was for another entry
	}
	h := sha256.Sum256(canonical)
	set, err := ecdsa.SignASN1(rand.Reader, s.rekorKey, h[:])
	if err != nil {
		t.Fatalf("%v", err)
	}
	return p, set
}

// signing fills in o's defaults for a signature of digest and returns
// the time it is made (to the second, as the log records it).
func (o *Keyless) signing(digest string) time.Time {
	if o.SignedDigest == "" {
		o.SignedDigest = digest
	}
	if o.IssuedAt.IsZero() {
		return time.Now().Truncate(time.Second)
	}
	return o.IssuedAt.Truncate(time.Second)
}

// CosignSignBundle attaches a signature by key of repo@digest as `cosign
// sign --key` (cosign 3) does: a Sigstore bundle whose verification
// material is the key's hint.
func CosignSignBundle(t TB, reg *Registry, repo, digest, signedDigest string, key *ecdsa.PrivateKey) {
	t.Helper()
	payload, sig := signStatement(t, key, signedDigest)
	pushBundle(t, reg, repo, digest, payload, sig, map[string]any{"publicKey": map[string]string{"hint": "cosign.pub"}})
}

// signStatement signs cosign 3's statement of an image digest in a DSSE
// envelope: the signature is over the envelope's PAE.
func signStatement(t TB, key *ecdsa.PrivateKey, digest string) (payload, sig []byte) {
	t.Helper()
	payload = fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"","digest":{"sha256":%q}}],"predicateType":"https://sigstore.dev/cosign/sign/v1","predicate":{}}`, strings.TrimPrefix(digest, "sha256:"))
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len("application/vnd.in-toto+json"), "application/vnd.in-toto+json", len(payload), payload)
	h := sha256.Sum256(pae)
	sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	if err != nil {
		t.Fatalf("%v", err)
	}
	return payload, sig
}

// pushBundle pushes a bundle as an OCI referrer of repo@digest, laid out
// as cosign 3 writes it (the registry's referrers tag updated where it
// has no referrers API).
func pushBundle(t TB, reg *Registry, repo, digest string, payload, sig []byte, material map[string]any) {
	t.Helper()
	const bundleType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	bundle, err := json.Marshal(map[string]any{
		"mediaType":            bundleType,
		"verificationMaterial": material,
		"dsseEnvelope":         map[string]any{"payload": payload, "payloadType": "application/vnd.in-toto+json", "signatures": []map[string][]byte{{"sig": sig}}},
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	PushBundle(t, reg, repo, digest, bundle)
}

// PushBundle pushes a Sigstore bundle (JSON) as an OCI referrer of
// repo@digest, laid out as cosign 3 writes it.
func PushBundle(t TB, reg *Registry, repo, digest string, bundle []byte) {
	t.Helper()
	PushReferrer(t, reg, repo, digest, "application/vnd.dev.sigstore.bundle.v0.3+json", bundle)
}

// PushReferrer pushes data as an OCI artifact of bundleType (its one
// layer; OCI's empty config) referring to repo@digest.
func PushReferrer(t TB, reg *Registry, repo, digest, bundleType string, bundle []byte) {
	t.Helper()
	r, err := name.NewRepository(reg.Host + "/" + repo)
	if err != nil {
		t.Fatalf("%v", err)
	}
	subject, err := remote.Get(r.Digest(digest))
	if err != nil {
		t.Fatalf("%v", err)
	}
	config := static.NewLayer([]byte("{}"), "application/vnd.oci.empty.v1+json")
	layer := static.NewLayer(bundle, types.MediaType(bundleType))
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(r, l); err != nil {
			t.Fatalf("%v", err)
		}
	}
	desc := func(l v1.Layer) map[string]any {
		d, _ := l.Digest()
		n, _ := l.Size()
		m, _ := l.MediaType()
		return map[string]any{"mediaType": m, "digest": d.String(), "size": n}
	}
	m := map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": bundleType,
		"config": desc(config), "layers": []any{desc(layer)},
		"subject": map[string]any{"mediaType": subject.MediaType, "digest": subject.Digest.String(), "size": subject.Size},
	}
	if strings.HasPrefix(bundleType, "application/vnd.dev.sigstore.bundle") {
		m["annotations"] = map[string]string{"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": "https://sigstore.dev/cosign/sign/v1"}
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("%v", err)
	}
	sum := sha256.Sum256(manifest)
	if err := remote.Put(r.Digest("sha256:"+hex.EncodeToString(sum[:])), rawManifest{manifest, "application/vnd.oci.image.manifest.v1+json"}); err != nil {
		t.Fatalf("pushing the %s referring to %s: %v", bundleType, digest, err)
	}
}

type rawManifest struct {
	data      []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.data, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }
