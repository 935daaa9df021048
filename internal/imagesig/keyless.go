package imagesig

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// The annotations of a keyless signature layer, as cosign writes them.
const (
	CertificateAnnotation = "dev.sigstore.cosign/certificate"
	ChainAnnotation       = "dev.sigstore.cosign/chain"
	BundleAnnotation      = "dev.sigstore.cosign/bundle"
)

// Fulcio's certificate extensions naming the OIDC issuer of the identity
// a certificate was issued to: the first as a raw string, the second
// (which replaced it) as a DER UTF8String.
var (
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}
	oidSCTList  = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}
)

// Identity is whom a keyless signature must come from: the OIDC issuer
// that vouched for the signer and the signer's identity in the
// certificate (an e-mail address or a URI such as a CI workflow's), each
// matched exactly or by a regular expression anchored at both ends, as
// cosign's --certificate-oidc-issuer(-regexp) and
// --certificate-identity(-regexp).
type Identity struct {
	Issuer, IssuerRegExp   string
	Subject, SubjectRegExp string
	issuerRE, subjectRE    *regexp.Regexp
}

// NewIdentity checks and compiles an identity.
func NewIdentity(issuer, issuerRegExp, subject, subjectRegExp string) (*Identity, error) {
	id := &Identity{Issuer: issuer, IssuerRegExp: issuerRegExp, Subject: subject, SubjectRegExp: subjectRegExp}
	if (issuer == "") == (issuerRegExp == "") {
		return nil, errors.New("give the OIDC issuer exactly or as a regular expression (one of issuer, issuerRegExp)")
	}
	if (subject == "") == (subjectRegExp == "") {
		return nil, errors.New("give the signer's identity exactly or as a regular expression (one of subject, subjectRegExp)")
	}
	var err error
	if issuerRegExp != "" {
		if id.issuerRE, err = regexp.Compile("^(?:" + issuerRegExp + ")$"); err != nil {
			return nil, fmt.Errorf("issuerRegExp: %w", err)
		}
	}
	if subjectRegExp != "" {
		if id.subjectRE, err = regexp.Compile("^(?:" + subjectRegExp + ")$"); err != nil {
			return nil, fmt.Errorf("subjectRegExp: %w", err)
		}
	}
	return id, nil
}

func (id *Identity) String() string {
	s, i := id.Subject, id.Issuer
	if id.SubjectRegExp != "" {
		s = "/" + id.SubjectRegExp + "/"
	}
	if id.IssuerRegExp != "" {
		i = "/" + id.IssuerRegExp + "/"
	}
	return s + " (issuer " + i + ")"
}

func (id *Identity) issuerOK(iss string) bool {
	if id.issuerRE != nil {
		return id.issuerRE.MatchString(iss)
	}
	return iss == id.Issuer
}

func (id *Identity) subjectOK(subjects []string) (string, bool) {
	for _, s := range subjects {
		if id.subjectRE != nil && id.subjectRE.MatchString(s) || id.subjectRE == nil && s == id.Subject {
			return s, true
		}
	}
	return "", false
}

// Signer is whom a verified keyless certificate was issued to.
type Signer struct {
	Subject string // the identity matched
	Issuer  string
}

// String is how a keyless signer is recorded.
func (s Signer) String() string { return "keyless, " + s.Subject + " (issuer " + s.Issuer + ")" }

// certIdentity reads a Fulcio certificate's OIDC issuer and subjects.
func certIdentity(cert *x509.Certificate) (issuer string, subjects []string) {
	for _, e := range cert.Extensions {
		switch {
		case e.Id.Equal(oidIssuerV2):
			var s string
			if _, err := asn1.UnmarshalWithParams(e.Value, &s, "utf8"); err == nil {
				issuer = s
			}
		case e.Id.Equal(oidIssuerV1) && issuer == "":
			issuer = string(e.Value)
		}
	}
	subjects = append(subjects, cert.EmailAddresses...)
	for _, u := range cert.URIs {
		subjects = append(subjects, u.String())
	}
	return issuer, subjects
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle: the transparency
// log's signed promise (SET) to include an entry.
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           string `json:"body"` // base64 of the entry
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"` // hex
	} `json:"Payload"`
}

// verifySET checks a transparency log's signed entry timestamp against
// the trusted logs: the log's signature over the canonical JSON of the
// entry (body, integratedTime, logID, logIndex, in that order, as RFC
// 8785 sorts them), by a log key valid at the time it gives.
func (r *TrustedRoot) verifySET(body string, integrated, index int64, logID string, set []byte) (time.Time, error) {
	t := time.Unix(integrated, 0)
	log, ok := r.tlogs[logID]
	if !ok {
		return t, fmt.Errorf("Rekor entry is in log %s, which the trusted root does not list", short(logID))
	}
	if !log.validAt(t) {
		return t, fmt.Errorf("Rekor entry is dated %s, when the key of log %s was not valid", t.UTC().Format(time.RFC3339), log.url)
	}
	canonical, _ := json.Marshal(struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogID          string `json:"logID"`
		LogIndex       int64  `json:"logIndex"`
	}{body, integrated, logID, index})
	if !verifiedBy(Keys{log.key}, canonical, set) {
		return t, fmt.Errorf("Rekor entry %d does not carry a valid signed entry timestamp of %s", index, log.url)
	}
	return t, nil
}

// verifyChain checks that cert was issued, at t, by one of the trusted
// certificate authorities for code signing; extra are intermediates the
// signature carried (trusted only as far as they chain to a root).
func (r *TrustedRoot) verifyChain(cert *x509.Certificate, extra []*x509.Certificate, t time.Time) (*x509.Certificate, error) {
	var last error
	for _, ca := range r.cas {
		if t.Before(ca.start) || !ca.end.IsZero() && t.After(ca.end) {
			continue
		}
		inter := ca.intermediates.Clone()
		for _, c := range extra {
			inter.AddCert(c)
		}
		chains, err := cert.Verify(x509.VerifyOptions{Roots: ca.roots, Intermediates: inter, CurrentTime: t, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}})
		if err == nil {
			return chains[0][1], nil
		}
		last = err
	}
	if last == nil {
		return nil, fmt.Errorf("certificate was logged at %s, when no trusted certificate authority was valid", t.UTC().Format(time.RFC3339))
	}
	return nil, fmt.Errorf("certificate was not issued by a trusted certificate authority: %w", last)
}

// verifySCT checks that a certificate authority logged the certificate
// in a trusted certificate transparency log: one of its embedded signed
// certificate timestamps verifies (RFC 6962 §3.2, a precertificate
// entry). Without CT logs in the trusted root there is nothing to check.
func (r *TrustedRoot) verifySCT(cert, issuer *x509.Certificate) error {
	if len(r.ctlogs) == 0 {
		return nil
	}
	var raw []byte
	for _, e := range cert.Extensions {
		if e.Id.Equal(oidSCTList) {
			raw = e.Value
		}
	}
	if raw == nil {
		return errors.New("certificate carries no signed certificate timestamp (it was not logged for transparency)")
	}
	var list []byte
	if _, err := asn1.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("certificate's timestamps cannot be read: %w", err)
	}
	tbs, err := tbsWithoutSCT(cert.RawTBSCertificate)
	if err != nil {
		return fmt.Errorf("certificate cannot be read: %w", err)
	}
	issuerHash := sha256.Sum256(issuer.RawSubjectPublicKeyInfo)
	s := cryptobyte.String(list)
	var scts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&scts) {
		return errors.New("certificate's timestamps cannot be read")
	}
	for !scts.Empty() {
		var sct cryptobyte.String
		var version uint8
		var logID []byte
		var ts uint64
		var exts, sig cryptobyte.String
		var hashAlg, sigAlg uint8
		if !scts.ReadUint16LengthPrefixed(&sct) || !sct.ReadUint8(&version) || !sct.ReadBytes(&logID, 32) ||
			!sct.ReadUint64(&ts) || !sct.ReadUint16LengthPrefixed(&exts) || !sct.ReadUint8(&hashAlg) ||
			!sct.ReadUint8(&sigAlg) || !sct.ReadUint16LengthPrefixed(&sig) {
			return errors.New("certificate's timestamps cannot be read")
		}
		log, ok := r.ctlogs[hex.EncodeToString(logID)]
		if !ok || version != 0 || !log.validAt(time.UnixMilli(int64(ts))) {
			continue
		}
		var b cryptobyte.Builder
		b.AddUint8(0) // v1
		b.AddUint8(0) // certificate_timestamp
		b.AddUint64(ts)
		b.AddUint16(1) // precert_entry
		b.AddBytes(issuerHash[:])
		b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(tbs) })
		b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(exts) })
		signed, err := b.Bytes()
		if err != nil {
			return err
		}
		if verifiedBy(Keys{log.key}, signed, sig) {
			return nil
		}
	}
	return errors.New("certificate has no signed certificate timestamp that verifies with a trusted certificate transparency log")
}

// tbsWithoutSCT is a TBSCertificate as the CA logged it, before the SCTs
// were added: the same DER without the SCT list extension.
func tbsWithoutSCT(tbs []byte) ([]byte, error) {
	in := cryptobyte.String(tbs)
	var body cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) {
		return nil, errors.New("TBSCertificate is not a sequence")
	}
	var b cryptobyte.Builder
	var outErr error
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		for !body.Empty() {
			var el cryptobyte.String
			var tag cbasn1.Tag
			if !body.ReadAnyASN1Element(&el, &tag) {
				outErr = errors.New("TBSCertificate cannot be read")
				return
			}
			if tag != cbasn1.Tag(3).Constructed().ContextSpecific() {
				b.AddBytes(el)
				continue
			}
			var exts cryptobyte.String
			if !el.ReadASN1(&el, tag) || !el.ReadASN1(&exts, cbasn1.SEQUENCE) {
				outErr = errors.New("TBSCertificate extensions cannot be read")
				return
			}
			b.AddASN1(tag, func(b *cryptobyte.Builder) {
				b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
					for !exts.Empty() {
						var ext, oidExt cryptobyte.String
						if !exts.ReadASN1Element(&ext, cbasn1.SEQUENCE) {
							outErr = errors.New("an extension cannot be read")
							return
						}
						inner := ext
						var oid asn1.ObjectIdentifier
						if !inner.ReadASN1(&oidExt, cbasn1.SEQUENCE) || !oidExt.ReadASN1ObjectIdentifier(&oid) {
							outErr = errors.New("an extension cannot be read")
							return
						}
						if !oid.Equal(oidSCTList) {
							b.AddBytes(ext)
						}
					}
				})
			})
		}
	})
	if outErr != nil {
		return nil, outErr
	}
	return b.Bytes()
}

// hashedRekord is the transparency log entry of a signature over a
// digest, as cosign uploads it.
type hashedRekord struct {
	Kind string `json:"kind"`
	Spec struct {
		Data struct {
			Hash struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"value"`
			} `json:"hash"`
		} `json:"data"`
		Signature struct {
			Content   []byte `json:"content"`
			PublicKey struct {
				Content []byte `json:"content"` // PEM
			} `json:"publicKey"`
		} `json:"signature"`
	} `json:"spec"`
}

// verifyKeyless checks one signature layer keylessly: the certificate
// holds the key the payload was signed with, the transparency log
// promised to record exactly this signature, certificate and payload,
// the certificate was issued by a trusted authority at the time the log
// gives (and logged for transparency), and to the identity trusted. What
// it returns names the signer; the error what was found instead.
func verifyKeyless(root *TrustedRoot, id *Identity, annotations map[string]string, data, sig []byte) (Signer, error) {
	certPEM := annotations[CertificateAnnotation]
	if certPEM == "" {
		return Signer{}, errors.New("one without a certificate (signed with a key)")
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		return Signer{}, errors.New("one whose certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return Signer{}, fmt.Errorf("one whose certificate cannot be read: %v", err)
	}
	if !verifiedBy(Keys{cert.PublicKey}, data, sig) {
		return Signer{}, errors.New("one whose signature does not verify with its certificate")
	}
	var extra []*x509.Certificate
	rest := []byte(annotations[ChainAnnotation])
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			extra = append(extra, c)
		}
	}
	bundleJSON := annotations[BundleAnnotation]
	if bundleJSON == "" {
		return Signer{}, errors.New("one without a Rekor bundle (cosign sign --tlog-upload=false): it cannot be checked offline")
	}
	var rb rekorBundle
	if err := json.Unmarshal([]byte(bundleJSON), &rb); err != nil {
		return Signer{}, fmt.Errorf("one whose Rekor bundle cannot be read: %v", err)
	}
	p := rb.Payload
	t, err := root.verifySET(p.Body, p.IntegratedTime, p.LogIndex, p.LogID, rb.SignedEntryTimestamp)
	if err != nil {
		return Signer{}, fmt.Errorf("one whose %w", err)
	}
	if err := entryMatches(p.Body, cert, data, sig); err != nil {
		return Signer{}, fmt.Errorf("one whose Rekor entry %d %w", p.LogIndex, err)
	}
	return root.checkCertificate(id, cert, extra, t)
}

// checkCertificate checks a signing certificate at the time a log gave:
// issued by a trusted authority, logged for transparency, and to the
// identity trusted.
func (r *TrustedRoot) checkCertificate(id *Identity, cert *x509.Certificate, extra []*x509.Certificate, t time.Time) (Signer, error) {
	issuer, err := r.verifyChain(cert, extra, t)
	if err != nil {
		return Signer{}, fmt.Errorf("one whose %w", err)
	}
	if err := r.verifySCT(cert, issuer); err != nil {
		return Signer{}, fmt.Errorf("one whose %w", err)
	}
	iss, subjects := certIdentity(cert)
	if !id.issuerOK(iss) {
		return Signer{}, fmt.Errorf("one by %s issued by %s, not the issuer trusted", strings.Join(subjects, ", "), iss)
	}
	subject, ok := id.subjectOK(subjects)
	if !ok {
		return Signer{}, fmt.Errorf("one by %s (issuer %s), not the identity trusted", strings.Join(subjects, ", "), iss)
	}
	return Signer{Subject: subject, Issuer: iss}, nil
}

// entryMatches checks that a hashedrekord entry records this payload's
// digest, this signature and this certificate.
func entryMatches(body string, cert *x509.Certificate, data, sig []byte) error {
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return errors.New("cannot be read")
	}
	var e hashedRekord
	if err := json.Unmarshal(raw, &e); err != nil || e.Kind != "hashedrekord" {
		return errors.New("is not a hashedrekord entry")
	}
	sum := sha256.Sum256(data)
	if e.Spec.Data.Hash.Algorithm != "sha256" || e.Spec.Data.Hash.Value != hex.EncodeToString(sum[:]) {
		return errors.New("records another payload")
	}
	if !bytes.Equal(e.Spec.Signature.Content, sig) {
		return errors.New("records another signature")
	}
	block, _ := pem.Decode(e.Spec.Signature.PublicKey.Content)
	if block == nil || !bytes.Equal(block.Bytes, cert.Raw) {
		return errors.New("records another certificate")
	}
	return nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
