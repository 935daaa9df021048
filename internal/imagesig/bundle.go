package imagesig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"sluice.dev/sluice/internal/registry"
)

// BundleArtifactType is the artifact type of the Sigstore bundles cosign 3
// attaches to an image it signs (OCI referrers).
const BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// The in-toto statement cosign 3 signs for an image.
const (
	inTotoPayloadType = "application/vnd.in-toto+json"
	cosignSignV1      = "https://sigstore.dev/cosign/sign/v1"
)

// sigBundle is the part of a Sigstore bundle (v0.1 to v0.3) Sluice reads.
type sigBundle struct {
	VerificationMaterial struct {
		Certificate *struct {
			RawBytes []byte `json:"rawBytes"`
		} `json:"certificate"`
		X509CertificateChain *struct {
			Certificates []struct {
				RawBytes []byte `json:"rawBytes"`
			} `json:"certificates"`
		} `json:"x509CertificateChain"`
		TlogEntries []tlogEntry `json:"tlogEntries"`
	} `json:"verificationMaterial"`
	DSSEEnvelope *struct {
		Payload     []byte `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			Sig []byte `json:"sig"`
		} `json:"signatures"`
	} `json:"dsseEnvelope"`
}

// tlogEntry is a transparency log entry of a bundle (protobuf JSON: 64-bit
// numbers are strings).
type tlogEntry struct {
	LogIndex int64 `json:"logIndex,string"`
	LogID    struct {
		KeyID []byte `json:"keyId"`
	} `json:"logId"`
	IntegratedTime   int64 `json:"integratedTime,string"`
	InclusionPromise *struct {
		SignedEntryTimestamp []byte `json:"signedEntryTimestamp"`
	} `json:"inclusionPromise"`
	CanonicalizedBody []byte `json:"canonicalizedBody"`
}

// statement is the part of an in-toto statement Sluice reads.
type statement struct {
	Type    string `json:"_type"`
	Subject []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string `json:"predicateType"`
}

// verifyBundles checks the Sigstore bundles that refer to repo@digest, as
// cosign 3 attaches them: whose signature verified, or what was seen.
func verifyBundles(ctx context.Context, reg *registry.Client, repo, digest string, p *Policy) (string, []string, error) {
	descs, err := reg.Referrers(ctx, repo, digest, BundleArtifactType)
	if err != nil {
		return "", nil, err
	}
	var seen []string
	for i, desc := range descs {
		if i >= maxSignatures {
			break
		}
		ref, err := reg.ParseReference(repo + "@" + desc.Digest.String())
		if err != nil {
			return "", nil, err
		}
		img, err := reg.Image(ctx, ref)
		if err != nil {
			return "", nil, fmt.Errorf("reading the Sigstore bundle %s: %w", ref, err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) == 0 {
			seen = append(seen, "a bundle without content ("+desc.Digest.String()+")")
			continue
		}
		data, err := readLayer(layers[0])
		if err != nil {
			if errors.Is(err, errTooLarge) {
				seen = append(seen, "a bundle too large to read")
				continue
			}
			return "", nil, fmt.Errorf("reading the Sigstore bundle %s: %w", ref, err)
		}
		payload, by, err := verifyBundle(p, data)
		if err != nil {
			seen = append(seen, "a bundle "+strings.TrimPrefix(err.Error(), "one "))
			continue
		}
		if err := imageStatement(payload, digest); err != nil {
			seen = append(seen, "a bundle "+err.Error())
			continue
		}
		return by, nil, nil
	}
	return "", seen, nil
}

// verifyBundle checks a Sigstore bundle's DSSE signature under p and
// returns the payload signed and whose signature it is. Keyless, the
// certificate must pass as in verifyKeyless, at the time a transparency
// log entry of the bundle promises (its entry recording this envelope).
func verifyBundle(p *Policy, data []byte) ([]byte, string, error) {
	var b sigBundle
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, "", fmt.Errorf("one that cannot be read: %v", err)
	}
	env := b.DSSEEnvelope
	if env == nil || len(env.Signatures) == 0 {
		return nil, "", errors.New("one without a DSSE envelope (not an image signature)")
	}
	pae := dssePAE(env.PayloadType, env.Payload)
	sig := env.Signatures[0].Sig
	if p.Identity == nil {
		if !verifiedBy(p.Keys, pae, sig) {
			return nil, "", errors.New("one by another key")
		}
		return env.Payload, p.name(), nil
	}
	vm := b.VerificationMaterial
	var der [][]byte
	switch {
	case vm.Certificate != nil:
		der = [][]byte{vm.Certificate.RawBytes}
	case vm.X509CertificateChain != nil:
		for _, c := range vm.X509CertificateChain.Certificates {
			der = append(der, c.RawBytes)
		}
	}
	if len(der) == 0 {
		return nil, "", errors.New("one without a certificate (signed with a key)")
	}
	cert, err := x509.ParseCertificate(der[0])
	if err != nil {
		return nil, "", fmt.Errorf("one whose certificate cannot be read: %v", err)
	}
	var extra []*x509.Certificate
	for _, d := range der[1:] {
		if c, err := x509.ParseCertificate(d); err == nil {
			extra = append(extra, c)
		}
	}
	if !verifiedBy(Keys{cert.PublicKey}, pae, sig) {
		return nil, "", errors.New("one whose signature does not verify with its certificate")
	}
	root := p.root()
	var t time.Time
	var why error = errors.New("one without a transparency log entry: it cannot be checked offline")
	for _, e := range vm.TlogEntries {
		if e.InclusionPromise == nil {
			why = errors.New("one whose transparency log entry carries no signed promise (a Rekor v2 entry: an inclusion proof and an RFC 3161 timestamp, which Sluice does not check yet)")
			continue
		}
		at, err := root.verifySET(base64.StdEncoding.EncodeToString(e.CanonicalizedBody), e.IntegratedTime, e.LogIndex, hex.EncodeToString(e.LogID.KeyID), e.InclusionPromise.SignedEntryTimestamp)
		if err != nil {
			why = fmt.Errorf("one whose %w", err)
			continue
		}
		if err := envelopeEntryMatches(e, env.Payload, sig); err != nil {
			why = fmt.Errorf("one whose Rekor entry %d %w", e.LogIndex, err)
			continue
		}
		t, why = at, nil
		break
	}
	if why != nil {
		return nil, "", why
	}
	signer, err := root.checkCertificate(p.Identity, cert, extra, t)
	if err != nil {
		return nil, "", err
	}
	return env.Payload, signer.String(), nil
}

// dssePAE is what a DSSE signature signs: the pre-authentication encoding
// of the payload and its type.
func dssePAE(payloadType string, payload []byte) []byte {
	return fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(payloadType), payloadType, len(payload), payload)
}

// envelopeEntryMatches checks that a log entry of kind dsse (0.0.1) or
// intoto (0.0.2) records this payload and this signature.
func envelopeEntryMatches(e tlogEntry, payload, sig []byte) error {
	sum := sha256.Sum256(payload)
	want := hex.EncodeToString(sum[:])
	var body struct {
		Kind string `json:"kind"`
		Spec struct {
			// dsse 0.0.1
			PayloadHash *struct {
				Value string `json:"value"`
			} `json:"payloadHash"`
			Signatures []struct {
				Signature string `json:"signature"`
			} `json:"signatures"`
			// intoto 0.0.2
			Content *struct {
				PayloadHash struct {
					Value string `json:"value"`
				} `json:"payloadHash"`
				Envelope struct {
					Signatures []struct {
						Sig string `json:"sig"` // base64 of the base64 signature
					} `json:"signatures"`
				} `json:"envelope"`
			} `json:"content"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(e.CanonicalizedBody, &body); err != nil {
		return errors.New("cannot be read")
	}
	var hash string
	var sigs [][]byte
	switch body.Kind {
	case "dsse":
		if body.Spec.PayloadHash != nil {
			hash = body.Spec.PayloadHash.Value
		}
		for _, s := range body.Spec.Signatures {
			if d, err := base64.StdEncoding.DecodeString(s.Signature); err == nil {
				sigs = append(sigs, d)
			}
		}
	case "intoto":
		if c := body.Spec.Content; c != nil {
			hash = c.PayloadHash.Value
			for _, s := range c.Envelope.Signatures {
				if once, err := base64.StdEncoding.DecodeString(s.Sig); err == nil {
					if d, err := base64.StdEncoding.DecodeString(string(once)); err == nil {
						sigs = append(sigs, d)
					}
				}
			}
		}
	default:
		return fmt.Errorf("is a %s entry, not one of a DSSE envelope", body.Kind)
	}
	if hash != want {
		return errors.New("records another payload")
	}
	for _, s := range sigs {
		if bytes.Equal(s, sig) {
			return nil
		}
	}
	return errors.New("records another signature")
}

// imageStatement checks that a signed payload is cosign 3's signature of
// the image digest: an in-toto statement of predicate type
// https://sigstore.dev/cosign/sign/v1 whose subject is the digest.
func imageStatement(payload []byte, digest string) error {
	var st statement
	if err := json.Unmarshal(payload, &st); err != nil || !strings.HasPrefix(st.Type, "https://in-toto.io/Statement/") {
		return errors.New("not of an in-toto statement")
	}
	if st.PredicateType != cosignSignV1 {
		return fmt.Errorf("of an attestation (%s), not a signature", st.PredicateType)
	}
	hexDigest := strings.TrimPrefix(digest, "sha256:")
	var others []string
	for _, s := range st.Subject {
		if s.Digest["sha256"] == hexDigest {
			return nil
		}
		others = append(others, "sha256:"+s.Digest["sha256"])
	}
	return fmt.Errorf("for %s", strings.Join(others, ", "))
}
