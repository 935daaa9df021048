package imagesig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Verification is sigstore-go's: a signature is mapped to a signed entity
// (cosign 3's bundle as it is; cosign 2's signature layer as the
// version 0.1 bundle its annotations amount to) and verified under the
// policy's trusted material. What is Sluice's own is finding signatures
// where cosign puts them and saying what was found.

// keylessChecks are the checks `cosign verify` makes of a keyless
// signature: the signature is in a transparency log, the certificate was
// valid when an observer (the log's integrated time, or an RFC 3161
// timestamp for a Rekor v2 entry) saw it, and, where the trusted root
// lists certificate transparency logs, the certificate was logged in one
// (an SCT).
func keylessChecks(tr *root.TrustedRoot) []verify.VerifierOption {
	opts := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	if len(tr.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	return opts
}

// verifyEntity verifies e under p, for the artifact given (a function:
// an artifact reader is read once per verification), and says whose
// signature it is; the error says what was found instead.
func (p *Policy) verifyEntity(e verify.SignedEntity, artifact func() verify.ArtifactPolicyOption) (string, error) {
	vc, err := e.VerificationContent()
	if err != nil {
		return "", fmt.Errorf("one that cannot be read: %v", err)
	}
	cert := vc.Certificate()
	if p.Identity == nil {
		if cert != nil {
			// Signed keylessly: the keys trusted are not its key.
			return "", errors.New("one by another key")
		}
		for _, k := range p.Keys {
			for _, v := range keyVerifiers(k) {
				material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
					return root.NewExpiringKey(v, time.Time{}, time.Time{}), nil
				})
				sv, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
				if err != nil {
					return "", err
				}
				if _, err := sv.Verify(e, verify.NewPolicy(artifact(), verify.WithKey())); err == nil {
					return p.name(), nil
				}
			}
		}
		return "", errors.New("one by another key")
	}
	if cert == nil {
		return "", errors.New("one without a certificate (signed with a key)")
	}
	id := p.Identity
	issuer, subject := id.Issuer, id.Subject
	issuerRE, subjectRE := "", ""
	if id.issuerRE != nil {
		issuer, issuerRE = "", id.issuerRE.String()
	}
	if id.subjectRE != nil {
		subject, subjectRE = "", id.subjectRE.String()
	}
	ci, err := verify.NewShortCertificateIdentity(issuer, issuerRE, subject, subjectRE)
	if err != nil {
		return "", err
	}
	tr := p.root().material
	sv, err := verify.NewVerifier(tr, keylessChecks(tr)...)
	if err != nil {
		return "", err
	}
	res, err := sv.Verify(e, verify.NewPolicy(artifact(), verify.WithCertificateIdentity(ci)))
	if err != nil {
		return "", p.why(sv, e, cert, artifact, err)
	}
	signer := Signer{Issuer: res.Signature.Certificate.Issuer}
	_, subjects := certIdentity(cert)
	signer.Subject, _ = id.subjectOK(subjects)
	return signer.String(), nil
}

// why says what a keyless signature that failed verification is: one by
// another identity (all else holds), one logged where the root does not
// trust, or what sigstore-go found.
func (p *Policy) why(sv *verify.Verifier, e verify.SignedEntity, cert *x509.Certificate, artifact func() verify.ArtifactPolicyOption, err error) error {
	if _, aerr := sv.Verify(e, verify.NewPolicy(artifact(), verify.WithoutIdentitiesUnsafe())); aerr == nil {
		iss, subjects := certIdentity(cert)
		if !p.Identity.issuerOK(iss) {
			return fmt.Errorf("one by %s issued by %s, not the issuer trusted", strings.Join(subjects, ", "), iss)
		}
		return fmt.Errorf("one by %s (issuer %s), not the identity trusted", strings.Join(subjects, ", "), iss)
	}
	if entries, terr := e.TlogEntries(); terr == nil && len(entries) > 0 {
		logs := p.root().material.RekorLogs()
		var unknown []string
		for _, t := range entries {
			id := hex.EncodeToString([]byte(t.LogKeyID()))
			if _, ok := logs[id]; !ok {
				unknown = append(unknown, fmt.Sprintf("Rekor entry %d is in log %s", t.LogIndex(), short(id)))
			}
		}
		if len(unknown) == len(entries) {
			return fmt.Errorf("one whose %s, which the trusted root does not list", strings.Join(unknown, "; "))
		}
	}
	return fmt.Errorf("one that does not verify: %s", printable(err.Error()))
}

// printable is a message with what cannot be shown (sigstore-go names
// some hashes as raw bytes) escaped.
func printable(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "\\x%02x", r)
		}
	}
	return b.String()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// keyVerifiers are the ways cosign signs with k: SHA-256 with ECDSA, RSA
// PKCS #1 v1.5 or PSS; Ed25519 over the message itself.
func keyVerifiers(k crypto.PublicKey) []signature.Verifier {
	var out []signature.Verifier
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if v, err := signature.LoadECDSAVerifier(k, crypto.SHA256); err == nil {
			out = append(out, v)
		}
	case ed25519.PublicKey:
		if v, err := signature.LoadED25519Verifier(k); err == nil {
			out = append(out, v)
		}
	case *rsa.PublicKey:
		if v, err := signature.LoadRSAPKCS1v15Verifier(k, crypto.SHA256); err == nil {
			out = append(out, v)
		}
		if v, err := signature.LoadRSAPSSVerifier(k, crypto.SHA256, nil); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// legacyEntity is a cosign 2 signature layer (its payload, signature and
// annotations) as the version 0.1 Sigstore bundle it amounts to: a
// message signature over the payload, the certificate and chain of a
// keyless one, and the Rekor entry its bundle annotation promises.
func legacyEntity(annotations map[string]string, payload, sig []byte, keyless bool) (*bundle.Bundle, error) {
	sum := sha256.Sum256(payload)
	pb := &protobundle.Bundle{
		MediaType: "application/vnd.dev.sigstore.bundle+json;version=0.1",
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}},
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{}},
		},
	}
	certPEM := annotations[CertificateAnnotation]
	if keyless && certPEM == "" {
		return nil, errors.New("one without a certificate (signed with a key)")
	}
	if certPEM != "" {
		var chain []*protocommon.X509Certificate
		rest := []byte(certPEM + "\n" + annotations[ChainAnnotation])
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type == "CERTIFICATE" {
				chain = append(chain, &protocommon.X509Certificate{RawBytes: b.Bytes})
			}
		}
		if len(chain) == 0 {
			return nil, errors.New("one whose certificate is not PEM")
		}
		if _, err := x509.ParseCertificate(chain[0].RawBytes); err != nil {
			return nil, fmt.Errorf("one whose certificate cannot be read: %v", err)
		}
		pb.VerificationMaterial.Content = &protobundle.VerificationMaterial_X509CertificateChain{
			X509CertificateChain: &protocommon.X509CertificateChain{Certificates: chain}}
	}
	if rb := annotations[BundleAnnotation]; rb != "" {
		e, err := legacyTlogEntry(rb)
		if err != nil {
			return nil, err
		}
		pb.VerificationMaterial.TlogEntries = []*protorekor.TransparencyLogEntry{e}
	} else if keyless {
		return nil, errors.New("one without a Rekor bundle (cosign sign --tlog-upload=false): it cannot be checked offline")
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return nil, fmt.Errorf("one that cannot be read: %v", err)
	}
	return b, nil
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

// legacyTlogEntry reads cosign's bundle annotation as a transparency log
// entry with its inclusion promise.
func legacyTlogEntry(annotation string) (*protorekor.TransparencyLogEntry, error) {
	var rb rekorBundle
	if err := json.Unmarshal([]byte(annotation), &rb); err != nil {
		return nil, fmt.Errorf("one whose Rekor bundle cannot be read: %v", err)
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, fmt.Errorf("one whose Rekor bundle cannot be read: %v", err)
	}
	var kind struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kind); err != nil {
		return nil, fmt.Errorf("one whose Rekor entry cannot be read: %v", err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, fmt.Errorf("one whose Rekor bundle names no log: %v", err)
	}
	return &protorekor.TransparencyLogEntry{
		LogIndex:          rb.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kind.Kind, Version: kind.APIVersion},
		IntegratedTime:    rb.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
		CanonicalizedBody: body,
	}, nil
}

// bundleEntity reads a Sigstore bundle (versions 0.1 to 0.3), as cosign 3
// attaches it.
func bundleEntity(data []byte) (*bundle.Bundle, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("one that cannot be read: %v", err)
	}
	if b.GetDsseEnvelope() == nil {
		return nil, errors.New("one without a DSSE envelope (not an image signature)")
	}
	return &b, nil
}

// verifyBundle checks a Sigstore bundle's signature under p, for the
// image digest, and returns whose it is.
func verifyBundle(p *Policy, data []byte, digest string) (string, error) {
	b, err := bundleEntity(data)
	if err != nil {
		return "", err
	}
	payload := b.GetDsseEnvelope().GetPayload()
	// What the envelope says of itself is reported only when its
	// signature holds: checked first, said after.
	want, err := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	if err != nil {
		return "", err
	}
	by, err := p.verifyEntity(b, func() verify.ArtifactPolicyOption { return verify.WithArtifactDigest("sha256", want) })
	serr := imageStatement(payload, digest)
	switch {
	case err == nil && serr != nil:
		return "", serr // signed, but an attestation
	case err == nil:
		return by, nil
	case serr != nil:
		// Signed for something else, or not signed at all?
		if _, aerr := p.verifyEntity(b, verify.WithoutArtifactUnsafe); aerr == nil {
			return "", serr
		}
	}
	return "", err
}
