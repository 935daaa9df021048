package artifactsig

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/notaryproject/notation-go"
	notationreg "github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/signer"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// NotationKey is a Notation signing key and its certificate chain (the
// leaf first), as `notation cert generate-test` writes them (NAME.key,
// NAME.crt) or a CA issues them.
type NotationKey struct {
	key   crypto.PrivateKey
	chain []*x509.Certificate
}

// ParseNotationKey reads a PEM private key (PKCS #8, or EC / RSA) and a
// PEM certificate chain.
func ParseNotationKey(keyPEM, chainPEM []byte) (*NotationKey, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("the Notation key is not PEM")
	}
	var key crypto.PrivateKey
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Notation key: %w", err)
	}
	var chain []*x509.Certificate
	for rest := chainPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("reading the Notation certificate chain: %w", err)
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 {
		return nil, errors.New("the Notation certificate chain holds no certificate")
	}
	// A key that is not the certificate's cannot make signatures its
	// verifiers accept: refused here, before anything is pushed.
	pub, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the Notation key cannot sign")
	}
	if eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(chain[0].PublicKey) {
		return nil, fmt.Errorf("the Notation key is not the key of the certificate %q (the first of the chain)", chain[0].Subject.String())
	}
	return &NotationKey{key: key, chain: chain}, nil
}

// NotationOptions reach the registry.
type NotationOptions struct {
	// Repository, when set, is the repository as its client reaches it
	// (credentials, transport, plain HTTP); the rest is then ignored.
	Repository *remote.Repository
	// PlainHTTP reaches it over HTTP (a registry on loopback).
	PlainHTTP bool
	// Client makes its requests (credentials, transport); nil is an
	// anonymous client.
	Client *auth.Client
	// Transport, when Client is nil, carries an anonymous client's
	// requests.
	Transport http.RoundTripper
}

// SignNotation signs the manifest ref names as `notation sign` does:
// notation-go's own signing, a JWS envelope, attached as an OCI referrer
// of the manifest (through the referrers tag where the registry has no
// referrers API).
func SignNotation(ctx context.Context, ref name.Digest, key *NotationKey, o NotationOptions) error {
	s, err := signer.NewGenericSigner(key.key, key.chain)
	if err != nil {
		return fmt.Errorf("the Notation key: %w", err)
	}
	repo := o.Repository
	if repo == nil {
		if repo, err = remote.NewRepository(ref.Context().Name()); err != nil {
			return err
		}
		repo.PlainHTTP = o.PlainHTTP
		switch {
		case o.Client != nil:
			repo.Client = o.Client
		case o.Transport != nil:
			repo.Client = &auth.Client{Client: &http.Client{Transport: o.Transport}}
		}
	}
	_, err = notation.Sign(ctx, s, notationreg.NewRepository(repo), notation.SignOptions{
		SignerSignOptions: notation.SignerSignOptions{SignatureMediaType: "application/jose+json"},
		ArtifactReference: ref.DigestStr(),
	})
	if err != nil {
		return fmt.Errorf("signing %s with Notation: %w", ref, err)
	}
	return nil
}
