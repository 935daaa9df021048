package testenv

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// VirtualSigstore is a test Sigstore instance from sigstore-go's own
// testing package: a Fulcio CA, a Rekor log (v1 entries with inclusion
// proofs and promises, or v2 entries with a checkpoint) and a timestamp
// authority. Its certificates name the signer by e-mail and carry no
// certificate transparency timestamps, so its trusted root lists no CT
// log.
type VirtualSigstore struct {
	vs *ca.VirtualSigstore
}

// NewVirtualSigstore starts an instance.
func NewVirtualSigstore(t TB) *VirtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatalf("a virtual Sigstore: %v", err)
	}
	return &VirtualSigstore{vs: vs}
}

// TrustedRoot is the instance's trusted_root.json.
func (s *VirtualSigstore) TrustedRoot(t TB) []byte {
	t.Helper()
	span := func(start, end time.Time) *protocommon.TimeRange {
		r := &protocommon.TimeRange{Start: timestamppb.New(start)}
		if !end.IsZero() {
			r.End = timestamppb.New(end)
		}
		return r
	}
	// authority is a CA as the root lists it: its chain from the
	// certificate that signs to the root.
	authority := func(uri string, certs []*x509.Certificate, start, end time.Time) *prototrustroot.CertificateAuthority {
		chain := &protocommon.X509CertificateChain{}
		for _, c := range certs {
			if c != nil {
				chain.Certificates = append(chain.Certificates, &protocommon.X509Certificate{RawBytes: c.Raw})
			}
		}
		return &prototrustroot.CertificateAuthority{Uri: uri, CertChain: chain, ValidFor: span(start, end)}
	}
	tr := &prototrustroot.TrustedRoot{MediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}
	for _, a := range s.vs.FulcioCertificateAuthorities() {
		f := a.(*root.FulcioCertificateAuthority)
		tr.CertificateAuthorities = append(tr.CertificateAuthorities,
			authority(f.URI, append(append([]*x509.Certificate(nil), f.Intermediates...), f.Root), f.ValidityPeriodStart, f.ValidityPeriodEnd))
	}
	for _, a := range s.vs.TimestampingAuthorities() {
		ts := a.(*root.SigstoreTimestampingAuthority)
		tr.TimestampAuthorities = append(tr.TimestampAuthorities,
			authority(ts.URI, append(append([]*x509.Certificate{ts.Leaf}, ts.Intermediates...), ts.Root), ts.ValidityPeriodStart, ts.ValidityPeriodEnd))
	}
	for id, l := range s.vs.RekorLogs() {
		key, err := x509.MarshalPKIXPublicKey(l.PublicKey)
		if err != nil {
			t.Fatalf("%v", err)
		}
		raw, err := hex.DecodeString(id)
		if err != nil {
			t.Fatalf("%v", err)
		}
		tr.Tlogs = append(tr.Tlogs, &prototrustroot.TransparencyLogInstance{
			BaseUrl: l.BaseURL, HashAlgorithm: protocommon.HashAlgorithm_SHA2_256,
			PublicKey: &protocommon.PublicKey{RawBytes: key, KeyDetails: protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256,
				ValidFor: span(l.ValidityPeriodStart, l.ValidityPeriodEnd)},
			LogId: &protocommon.LogId{KeyId: raw},
		})
	}
	data, err := protojson.Marshal(tr)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return data
}

// BundleOptions say what a signature of VirtualSigstore.SignBundle is,
// and what is wrong with it.
type BundleOptions struct {
	// Identity is the signer's e-mail address in the certificate; Issuer
	// the OIDC issuer that vouched for it.
	Identity, Issuer string
	// RekorV2 logs a Rekor v2 hashedrekord entry (an inclusion proof and
	// a checkpoint, no integrated time), dated by an RFC 3161 timestamp
	// of the instance's timestamp authority; else a Rekor v1 dsse entry
	// with an inclusion proof and a signed promise.
	RekorV2 bool
	// SignedDigest is the digest the statement names (default: the
	// image's).
	SignedDigest string
	// PredicateType is the statement's (default cosign's signature,
	// https://sigstore.dev/cosign/sign/v1).
	PredicateType string
	// LoggedAt is the entry's integrated time (default: within the
	// certificate's ten minutes).
	LoggedAt time.Time
	// NoEntry leaves the transparency log entry out.
	NoEntry bool
	// BadProof changes the root hash of the entry's inclusion proof and
	// of its checkpoint.
	BadProof bool
	// OtherEntry puts the genuine entry of another statement (by another
	// certificate) in place of the signature's own.
	OtherEntry bool
	// WrongSignature puts another certificate's signature of the same
	// statement in place of the one the certificate's key made.
	WrongSignature bool
	// LogOf logs the entry in another instance.
	LogOf *VirtualSigstore
}

// SignBundle attaches to repo@digest a Sigstore bundle (v0.3) of cosign
// 3's signature statement for the digest, as `cosign sign` does keylessly.
func (s *VirtualSigstore) SignBundle(t TB, reg *Registry, repo, digest string, o BundleOptions) {
	t.Helper()
	PushBundle(t, reg, repo, digest, s.Bundle(t, digest, o))
}

// Bundle is the JSON of the bundle SignBundle attaches.
func (s *VirtualSigstore) Bundle(t TB, digest string, o BundleOptions) []byte {
	t.Helper()
	signed := digest
	if o.SignedDigest != "" {
		signed = o.SignedDigest
	}
	predicate := o.PredicateType
	if predicate == "" {
		predicate = "https://sigstore.dev/cosign/sign/v1"
	}
	statement := fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"","digest":{"sha256":%q}}],"predicateType":%q,"predicate":{}}`,
		strings.TrimPrefix(signed, "sha256:"), predicate)
	logger := s
	if o.LogOf != nil {
		logger = o.LogOf
	}
	attest := func(by *VirtualSigstore, body []byte) *ca.TestEntity {
		var e *ca.TestEntity
		var err error
		switch {
		case o.RekorV2:
			e, err = by.vs.AttestHashedRekordV2(o.Identity, o.Issuer, body)
		case !o.LoggedAt.IsZero():
			e, err = by.vs.AttestAtTime(o.Identity, o.Issuer, body, o.LoggedAt, true)
		default:
			e, err = by.vs.AttestAtTime(o.Identity, o.Issuer, body, time.Now().Add(5*time.Minute), true)
		}
		if err != nil {
			t.Fatalf("attesting: %v", err)
		}
		return e
	}
	e := attest(s, statement)
	pb := entityBundle(t, s, e)
	if logger != s {
		// The same certificate and signature, logged elsewhere: the other
		// instance's entry of its own attestation replaces the log part.
		pb.VerificationMaterial.TlogEntries = entityBundle(t, logger, attest(logger, statement)).VerificationMaterial.TlogEntries
	}
	if o.OtherEntry {
		other := attest(s, fmt.Appendf(nil, `{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"","digest":{"sha256":%q}}],"predicateType":%q,"predicate":{}}`,
			strings.Repeat("0", 64), predicate))
		pb.VerificationMaterial.TlogEntries = entityBundle(t, s, other).VerificationMaterial.TlogEntries
	}
	if o.WrongSignature {
		other := entityBundle(t, s, attest(s, statement))
		pb.GetDsseEnvelope().Signatures = other.GetDsseEnvelope().Signatures
	}
	if o.NoEntry {
		pb.VerificationMaterial.TlogEntries = nil
	}
	if o.BadProof {
		// The signed checkpoint of another tree: its root hash changed.
		p := pb.VerificationMaterial.TlogEntries[0].InclusionProof
		lines := strings.SplitN(p.Checkpoint.Envelope, "\n", 4)
		hash, err := base64.StdEncoding.DecodeString(lines[2])
		if err != nil {
			t.Fatalf("the checkpoint %q: %v", p.Checkpoint.Envelope, err)
		}
		hash[0] ^= 1
		lines[2] = base64.StdEncoding.EncodeToString(hash)
		p.Checkpoint.Envelope = strings.Join(lines, "\n")
		p.RootHash = hash
	}
	data, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return data
}

// entityBundle is a sigstore-go test entity as the bundle (v0.3) cosign
// writes of it: the leaf certificate, the log entries, the RFC 3161
// timestamps and the DSSE envelope.
func entityBundle(t TB, by *VirtualSigstore, e *ca.TestEntity) *protobundle.Bundle {
	t.Helper()
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatalf("%v", err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		t.Fatalf("%v", err)
	}
	env := sc.EnvelopeContent().RawEnvelope()
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatalf("%v", err)
	}
	pe := &protodsse.Envelope{Payload: payload, PayloadType: env.PayloadType}
	for _, sig := range env.Signatures {
		raw, err := base64.StdEncoding.DecodeString(sig.Sig)
		if err != nil {
			t.Fatalf("%v", err)
		}
		pe.Signatures = append(pe.Signatures, &protodsse.Signature{Sig: raw, Keyid: sig.KeyID})
	}
	vm := &protobundle.VerificationMaterial{
		Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
	}
	entries, err := e.TlogEntries()
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, l := range entries {
		tle := l.TransparencyLogEntry()
		if tle.KindVersion == nil {
			tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
		}
		if !l.IsRekorV2() && tle.InclusionPromise == nil {
			// The log's promise (SET) of a Rekor v1 entry, signing its
			// integrated time, as Rekor v1 answers it.
			set, err := by.vs.RekorSignPayload(tlog.RekorPayload{Body: base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
				IntegratedTime: tle.IntegratedTime, LogIndex: tle.LogIndex, LogID: hex.EncodeToString(tle.LogId.KeyId)})
			if err != nil {
				t.Fatalf("%v", err)
			}
			tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
		}
		vm.TlogEntries = append(vm.TlogEntries, tle)
	}
	tss, err := e.Timestamps()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if len(tss) > 0 {
		vm.TimestampVerificationData = &protobundle.TimestampVerificationData{}
		for _, ts := range tss {
			vm.TimestampVerificationData.Rfc3161Timestamps = append(vm.TimestampVerificationData.Rfc3161Timestamps, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: ts})
		}
	}
	b := &protobundle.Bundle{
		MediaType:            "application/vnd.dev.sigstore.bundle.v0.3+json",
		VerificationMaterial: vm,
		Content:              &protobundle.Bundle_DsseEnvelope{DsseEnvelope: pe},
	}
	if _, err := bundle.NewBundle(b); err != nil {
		t.Fatalf("the bundle of a test entity: %v", err)
	}
	return b
}
