package artifactsig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"time"

	httptransport "github.com/go-openapi/runtime/client"
	"github.com/go-openapi/strfmt"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	rekorgen "github.com/sigstore/rekor/pkg/generated/client"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/types/known/structpb"
	orasremote "oras.land/oras-go/v2/registry/remote"
)

// Target is a pushed artifact to sign, and how to reach its repository.
type Target struct {
	Ref name.Digest
	// Remote reaches the repository through go-containerregistry (its
	// credentials and transport): cosign's signatures.
	Remote []remote.Option
	// ORAS reaches the same repository through oras: Notation's.
	ORAS *orasremote.Repository
}

// Signer signs pushed artifacts, and attaches a signed in-toto statement
// about each (its provenance).
type Signer interface {
	// Sign signs t and attaches a statement of predicateType about it,
	// signed as well.
	Sign(ctx context.Context, t Target, predicateType string, predicate *structpb.Struct) error
	// String says what signs, naming no secret: for errors and logs.
	String() string
}

// CosignKey signs as `cosign sign --key` and `cosign attest --key` do.
func CosignKey(k *Key, what string) Signer { return &cosignSigner{what: what, key: k} }

// Keyless signs as `cosign sign` does with an identity token and no key:
// an ephemeral key, a certificate Fulcio issues for the token's identity,
// a timestamp of the signature from a timestamp authority (which proves
// it was made while the short-lived certificate was valid).
type Keyless struct {
	// FulcioURL, TimestampURL and RekorURL are the Sigstore instance's:
	// the signature is logged in its transparency log (Rekor), which
	// verifiers (cosign verify, Flux's matchOIDCIdentity) ask for.
	FulcioURL, TimestampURL, RekorURL string
	// Token returns an OIDC identity token of audience sigstore, read at
	// each signature (a projected service account token is refreshed on
	// disk, a CI's is issued per job).
	Token func(ctx context.Context) (string, error)
	// Transport carries the requests (nil: http.DefaultTransport).
	Transport http.RoundTripper
}

// KeylessSigner signs with k.
func KeylessSigner(k Keyless) Signer {
	return &cosignSigner{what: "cosign keyless through " + k.FulcioURL, keyless: &k}
}

// cosignSigner is a key's, or keyless.
type cosignSigner struct {
	what    string
	key     *Key
	keyless *Keyless
}

func (s *cosignSigner) String() string { return s.what }

func (s *cosignSigner) Sign(ctx context.Context, t Target, predicateType string, predicate *structpb.Struct) error {
	keypair, opts, err := s.bundleOptions(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.what, err)
	}
	for _, st := range []struct {
		typ  string
		pred *structpb.Struct
	}{{CosignSignPredicate, &structpb.Struct{}}, {predicateType, predicate}} {
		if _, err := attest(ctx, t.Ref, keypair, opts, st.typ, st.pred, t.Remote...); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// bundleOptions are the key and options of one signature and its
// attestation: a key's, or an ephemeral key certified by Fulcio for the
// token read now (one certificate serves both).
func (s *cosignSigner) bundleOptions(ctx context.Context) (sign.Keypair, sign.BundleOptions, error) {
	if s.key != nil {
		return s.key, sign.BundleOptions{Context: ctx}, nil
	}
	k := s.keyless
	token, err := k.Token(ctx)
	if err != nil {
		return nil, sign.BundleOptions{}, fmt.Errorf("reading the identity token: %w", err)
	}
	if token == "" {
		return nil, sign.BundleOptions{}, errors.New("the identity token is empty")
	}
	keypair, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, sign.BundleOptions{}, err
	}
	transport := k.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	opts := sign.BundleOptions{
		Context:                    ctx,
		CertificateProvider:        sign.NewFulcio(&sign.FulcioOptions{BaseURL: k.FulcioURL, Timeout: 30 * time.Second, Retries: 1, Transport: transport}),
		CertificateProviderOptions: &sign.CertificateProviderOptions{IDToken: token},
		TimestampAuthorities:       []*sign.TimestampAuthority{sign.NewTimestampAuthority(&sign.TimestampAuthorityOptions{URL: k.TimestampURL, Timeout: 30 * time.Second, Retries: 1, Transport: transport})},
	}
	if k.RekorURL != "" {
		rc, err := rekorClient(k.RekorURL, transport)
		if err != nil {
			return nil, sign.BundleOptions{}, err
		}
		opts.TransparencyLogs = []sign.Transparency{sign.NewRekor(&sign.RekorOptions{BaseURL: k.RekorURL, Timeout: 30 * time.Second, Retries: 1, Client: rc.Entries})}
	}
	// The certificate is asked for once and serves the signature and the
	// attestation: Fulcio is asked once per artifact.
	cert, err := opts.CertificateProvider.GetCertificate(ctx, keypair, opts.CertificateProviderOptions)
	if err != nil {
		return nil, sign.BundleOptions{}, fmt.Errorf("Fulcio %s refused a certificate: %w", k.FulcioURL, err)
	}
	opts.CertificateProvider = fixedCertificate(cert)
	return keypair, opts, nil
}

// rekorClient is Rekor's own API client, its requests through transport
// (a controller's egress policy).
func rekorClient(base string, transport http.RoundTripper) (*rekorgen.Rekor, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the transparency log's URL %q is not a URL", base)
	}
	rt := httptransport.NewWithClient(u.Host, path.Join(u.Path, rekorgen.DefaultBasePath), []string{u.Scheme}, &http.Client{Transport: transport, Timeout: 30 * time.Second})
	return rekorgen.New(rt, strfmt.Default), nil
}

// fixedCertificate hands out a certificate already issued.
type fixedCertificate []byte

func (c fixedCertificate) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// NotationSigner signs as `notation sign` does; the statement is attached
// as an OCI referrer of the artifact (an in-toto statement, as ORAS
// attaches one) and signed by Notation in its turn.
func NotationSigner(k *NotationKey, what string) Signer { return &notationSigner{what: what, key: k} }

type notationSigner struct {
	what string
	key  *NotationKey
}

func (s *notationSigner) String() string { return s.what }

// InTotoMediaType is an in-toto statement's, as a referrer's artifact
// type and layer.
const InTotoMediaType = "application/vnd.in-toto+json"

func (s *notationSigner) Sign(ctx context.Context, t Target, predicateType string, predicate *structpb.Struct) error {
	if t.ORAS == nil {
		return fmt.Errorf("%s: no repository to attach the signature to", s.what)
	}
	o := NotationOptions{Repository: t.ORAS}
	if err := SignNotation(ctx, t.Ref, s.key, o); err != nil {
		return fmt.Errorf("%s: %w", s.what, err)
	}
	opts := append(append([]remote.Option{}, t.Remote...), remote.WithContext(ctx))
	subject, err := remote.Head(t.Ref, opts...)
	if err != nil {
		return fmt.Errorf("looking up %s to attest to it: %w", t.Ref, err)
	}
	statement, err := statementOf(subject, predicateType, predicate)
	if err != nil {
		return err
	}
	// protojson's spacing varies from run to run: the statement's bytes
	// are compacted, so that one statement is one referrer.
	var compact json.RawMessage
	if err := json.Unmarshal(statement, &compact); err == nil {
		if b, err := json.Marshal(compact); err == nil {
			statement = b
		}
	}
	h, err := attach(t.Ref, subject, statement, InTotoMediaType, InTotoMediaType, map[string]string{"in-toto.io/predicate-type": predicateType}, opts)
	if err != nil {
		return err
	}
	if err := SignNotation(ctx, t.Ref.Context().Digest(h.String()), s.key, o); err != nil {
		return fmt.Errorf("%s: signing the attestation: %w", s.what, err)
	}
	return nil
}
