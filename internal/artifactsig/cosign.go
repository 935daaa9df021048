// Package artifactsig signs what Sluice pushes to a registry, as the
// field's verifiers read signatures: cosign's, through sigstore-go's sign
// package, attached as cosign 3 attaches them (a Sigstore bundle in an
// OCI referrer of the signed manifest), which `cosign verify` and Flux's
// source-controller (spec.verify) check.
package artifactsig

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// The media types and annotations of a cosign 3 signature.
const (
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// CosignSignPredicate is the predicate type of cosign's signature
	// statement: the statement names the signed digest and nothing more.
	CosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"
	emptyMediaType      = "application/vnd.oci.empty.v1+json"
)

// Key is a cosign signing key: what `cosign generate-key-pair` writes
// (cosign.key, encrypted with a password), or a PKCS #8 PEM private key.
type Key struct {
	signer crypto.Signer
	alg    signature.AlgorithmDetails
	hint   []byte
}

// ParseKey reads a private key. An encrypted cosign key needs its
// password; an unencrypted one ignores it.
func ParseKey(data, password []byte) (*Key, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("not a PEM private key")
	}
	der := block.Bytes
	switch block.Type {
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
		var err error
		if der, err = encrypted.Decrypt(block.Bytes, password); err != nil {
			return nil, fmt.Errorf("decrypting the cosign key: wrong password? (%w)", err)
		}
	case "PRIVATE KEY", "EC PRIVATE KEY":
	default:
		return nil, fmt.Errorf("a PEM block of type %q is not a private key cosign signs with", block.Type)
	}
	var priv any
	var err error
	if block.Type == "EC PRIVATE KEY" {
		priv, err = x509.ParseECPrivateKey(der)
	} else {
		priv, err = x509.ParsePKCS8PrivateKey(der)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the private key: %w", err)
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", priv)
	}
	alg, err := signature.GetDefaultAlgorithmDetails(signer.Public())
	if err != nil {
		return nil, fmt.Errorf("the key: %w", err)
	}
	der, err = x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &Key{signer: signer, alg: alg, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

// PublicKeyPEM is the public key as `cosign verify --key` and Flux's
// verification Secret (cosign.pub) read it.
func (k *Key) PublicKeyPEM() ([]byte, error) {
	return cryptoutils.MarshalPublicKeyToPEM(k.signer.Public())
}

// The sign.Keypair methods: sigstore-go signs with the key through them.

func (k *Key) GetHashAlgorithm() protocommon.HashAlgorithm { return k.alg.GetProtoHashType() }
func (k *Key) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.alg.GetSignatureAlgorithm()
}
func (k *Key) GetHint() []byte                  { return k.hint }
func (k *Key) GetPublicKey() crypto.PublicKey   { return k.signer.Public() }
func (k *Key) GetPublicKeyPem() (string, error) { b, err := k.PublicKeyPEM(); return string(b), err }
func (k *Key) GetKeyAlgorithm() string {
	switch k.alg.GetKeyType() {
	case signature.ECDSA:
		return "ECDSA"
	case signature.RSA:
		return "RSA"
	case signature.ED25519:
		return "ED25519"
	}
	return ""
}

// SignData signs data's digest (the data itself for pure Ed25519) and
// returns the signature and what was signed.
func (k *Key) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	hf := k.alg.GetHashType()
	signed := data
	if hf != crypto.Hash(0) {
		h := hf.New()
		h.Write(data)
		signed = h.Sum(nil)
	}
	sig, err := k.signer.Sign(nil, signed, hf)
	return sig, signed, err
}

var _ sign.Keypair = (*Key)(nil)

// SignCosign signs the manifest ref names as `cosign sign --key` does
// (cosign 3, without a transparency log entry): a Sigstore bundle of a
// DSSE envelope of cosign's signature statement for the digest, made by
// sigstore-go, pushed as an OCI referrer of the manifest (through the
// referrers tag where the registry has no referrers API). It returns the
// referrer's digest.
func SignCosign(ctx context.Context, ref name.Digest, key *Key, opts ...remote.Option) (v1.Hash, error) {
	return Attest(ctx, ref, key, CosignSignPredicate, &structpb.Struct{}, opts...)
}

// Attest attaches to the manifest ref names an in-toto statement of
// predicateType about it, signed with key as `cosign attest --key`
// signs one (a Sigstore bundle of its DSSE envelope, made by
// sigstore-go), and returns the referrer's digest. SignCosign is the
// statement cosign's signatures are.
func Attest(ctx context.Context, ref name.Digest, key *Key, predicateType string, predicate *structpb.Struct, opts ...remote.Option) (v1.Hash, error) {
	return attest(ctx, ref, key, sign.BundleOptions{Context: ctx}, predicateType, predicate, opts...)
}

// attest signs a statement about ref with keypair (and what bo adds: a
// certificate, a timestamp) and attaches it.
func attest(ctx context.Context, ref name.Digest, keypair sign.Keypair, bo sign.BundleOptions, predicateType string, predicate *structpb.Struct, opts ...remote.Option) (v1.Hash, error) {
	opts = append(append([]remote.Option{}, opts...), remote.WithContext(ctx))
	subject, err := remote.Head(ref, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("looking up %s to sign it: %w", ref, err)
	}
	statement, err := statementOf(subject, predicateType, predicate)
	if err != nil {
		return v1.Hash{}, err
	}
	b, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"}, keypair, bo)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("signing %s: %w", ref, err)
	}
	bundle, err := protojson.Marshal(b)
	if err != nil {
		return v1.Hash{}, err
	}
	return attach(ref, subject, bundle, BundleMediaType, BundleMediaType,
		map[string]string{"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": predicateType}, opts)
}

// statementOf is the in-toto statement of predicateType about subject.
func statementOf(subject *v1.Descriptor, predicateType string, predicate *structpb.Struct) ([]byte, error) {
	return protojson.Marshal(&intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{{Digest: map[string]string{subject.Digest.Algorithm: subject.Digest.Hex}}},
		PredicateType: predicateType,
		Predicate:     predicate,
	})
}

// attach pushes content as a referrer of subject: an OCI image manifest
// of artifactType whose one layer is content, its config the empty
// descriptor, as cosign 3 writes its bundles (and ORAS attaches a file).
func attach(ref name.Digest, subject *v1.Descriptor, content []byte, mediaType, artifactType string, annotations map[string]string, opts []remote.Option) (v1.Hash, error) {
	config := static.NewLayer([]byte("{}"), emptyMediaType)
	layer := static.NewLayer(content, types.MediaType(mediaType))
	repo := ref.Context()
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("pushing the signature of %s: %w", ref, err)
		}
	}
	desc := func(l v1.Layer) v1.Descriptor {
		d, _ := l.Digest()
		n, _ := l.Size()
		mt, _ := l.MediaType()
		return v1.Descriptor{MediaType: mt, Digest: d, Size: n}
	}
	m := v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1, ArtifactType: artifactType,
		Config: desc(config), Layers: []v1.Descriptor{desc(layer)},
		Subject:     &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: annotations,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Put(repo.Digest(h.String()), rawManifest(raw), opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing the signature of %s: %w", ref, err)
	}
	return h, nil
}

// rawManifest is a manifest's bytes, as remote.Put takes them.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error) { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}
