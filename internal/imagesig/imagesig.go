// Package imagesig checks that an image digest carries a cosign signature
// of a trusted key before Sluice pins it. Signatures are read where cosign
// writes them: the tag sha256-<hex>.sig of the image's repository, each
// layer a simple-signing payload naming the digest signed, its signature
// in the layer's dev.cosignproject.cosign/signature annotation.
package imagesig

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/sigstore/sigstore-go/pkg/verify"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
)

// SignatureAnnotation holds a layer's signature in cosign's layout.
const SignatureAnnotation = "dev.cosignproject.cosign/signature"

// maxPayload bounds a signature layer read; maxSignatures the layers
// of a signature image looked at.
const (
	maxPayload    = 1 << 20
	maxSignatures = 64
)

// Keys are trusted cosign public keys.
type Keys []crypto.PublicKey

// ParseKeys reads PEM public keys (cosign.pub: "-----BEGIN PUBLIC
// KEY-----", ECDSA, Ed25519 or RSA).
func ParseKeys(data []byte) (Keys, error) {
	var out Keys
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			continue
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("a public key: %w", err)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM public key (-----BEGIN PUBLIC KEY-----), as cosign generate-key-pair writes cosign.pub")
	}
	return out, nil
}

// LoadKeys reads the CLI's cosign public keys, from the files given; nil
// when none is.
func LoadKeys(files []string) (Keys, error) {
	var out Keys
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--cosign-key: %w", err)
		}
		keys, err := ParseKeys(data)
		if err != nil {
			return nil, fmt.Errorf("--cosign-key %s: %w", f, err)
		}
		out = append(out, keys...)
	}
	return out, nil
}

// Policy is whose signature an image must carry: a signature by one of
// Keys, or (Identity set) a keyless one whose certificate was issued to
// Identity under Root.
type Policy struct {
	Keys     Keys
	Identity *Identity
	Root     *TrustedRoot // nil: PublicGood
	// Notation, when set, asks for a Notation signature its trust
	// policy accepts instead of a cosign one.
	Notation *Notation
	// Name says where the trust comes from, for what is recorded ("key
	// of Secret ci-cosign").
	Name string
}

// PolicyFor is what a rule's verify trusts, given the keys of its
// secretRef and the trusted root of its keyless (nil: PublicGood).
func PolicyFor(v *v1alpha1.ImageVerify, keys Keys, root *TrustedRoot) (*Policy, error) {
	if v.Provider == v1alpha1.VerifyNotation {
		return nil, errors.New("notation: give the trust policy and certificates (a Secret's trustpolicy.json and *.crt)")
	}
	if k := v.Keyless; k != nil {
		id, err := NewIdentity(k.Issuer, k.IssuerRegExp, k.Subject, k.SubjectRegExp)
		if err != nil {
			return nil, fmt.Errorf("keyless: %w", err)
		}
		return &Policy{Identity: id, Root: root}, nil
	}
	if v.SecretRef == nil {
		return nil, errors.New("give secretRef (a Secret with cosign.pub) or keyless")
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no key to check signatures with (the key of Secret %s)", v.SecretRef.Name)
	}
	return &Policy{Keys: keys, Name: "key of Secret " + v.SecretRef.Name}, nil
}

// key is what a verification by p is remembered under.
func (p *Policy) key() string {
	var b strings.Builder
	b.WriteString(" " + p.Name)
	for _, k := range p.Keys {
		der, _ := x509.MarshalPKIXPublicKey(k)
		b.WriteString(" " + base64.StdEncoding.EncodeToString(der))
	}
	if p.Identity != nil {
		id := p.Identity
		fmt.Fprintf(&b, " keyless %q %q %q %q %s", id.Issuer, id.IssuerRegExp, id.Subject, id.SubjectRegExp, p.root().sum)
	}
	if p.Notation != nil {
		b.WriteString(" notation " + p.Notation.sum)
	}
	return b.String()
}

// name says whose key a key-based signature verified with.
func (p *Policy) name() string {
	if p.Name == "" {
		return "a trusted key"
	}
	return p.Name
}

func (p *Policy) root() *TrustedRoot {
	if p.Root == nil {
		return PublicGood()
	}
	return p.Root
}

// Verified remembers the digests found signed, by repository, digest and
// policy, so that a check of a digest that did not move reads no
// signature again. The caller owns it (a controller keeps one for its
// life); the zero value is ready, and nil remembers nothing.
type Verified struct {
	mu   sync.Mutex
	seen map[string]string
}

// Verify is VerifyCosign, answered from memory for a digest already found
// signed under the same policy.
func (v *Verified) Verify(ctx context.Context, reg *registry.Client, repo, digest string, p *Policy) (string, error) {
	if v == nil {
		return Verify(ctx, reg, repo, digest, p)
	}
	k := repo + "@" + digest + p.key()
	v.mu.Lock()
	by, ok := v.seen[k]
	v.mu.Unlock()
	if ok {
		return by, nil
	}
	by, err := Verify(ctx, reg, repo, digest, p)
	if err != nil {
		return "", err // not remembered: a signature pushed next is seen at once
	}
	v.mu.Lock()
	if v.seen == nil || len(v.seen) > 100_000 {
		v.seen = map[string]string{}
	}
	v.seen[k] = by
	v.mu.Unlock()
	return by, nil
}

// payload is cosign's simple-signing payload.
type payload struct {
	Critical struct {
		Image struct {
			Digest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// Verify checks that repo@digest carries a signature p trusts: a
// Notation signature under p's Notation trust policy, else a cosign one
// (VerifyCosign). It says whose it is.
func Verify(ctx context.Context, reg *registry.Client, repo, digest string, p *Policy) (string, error) {
	if p.Notation != nil {
		return verifyNotation(ctx, reg, repo, digest, p.Notation)
	}
	return VerifyCosign(ctx, reg, repo, digest, p)
}

// VerifyCosign checks that repo@digest carries a signature p trusts, and
// says whose it is: p's Name for a key, the certificate's identity for a
// keyless one. The error says what was found: no signature, or
// signatures by other keys or identities, or for another digest.
func VerifyCosign(ctx context.Context, reg *registry.Client, repo, digest string, p *Policy) (string, error) {
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return "", fmt.Errorf("digest %s: not sha256", digest)
	}
	// cosign 2 writes a signature image under a tag; cosign 3 a Sigstore
	// bundle referring to the digest (OCI referrers).
	by, seen, err := verifyTagged(ctx, reg, repo, digest, hexDigest, p)
	if by != "" || err != nil {
		return by, err
	}
	by, more, err := verifyBundles(ctx, reg, repo, digest, p)
	if by != "" || err != nil {
		return by, err
	}
	seen = append(seen, more...)
	if len(seen) == 0 {
		return "", fmt.Errorf("no cosign signature (neither %s:sha256-%s.sig nor a Sigstore bundle referring to %s)", repo, hexDigest, digest)
	}
	trusted := "a trusted key"
	if p.Identity != nil {
		trusted = p.Identity.String()
	}
	return "", fmt.Errorf("no cosign signature by %s: %s holds %s", trusted, repo, strings.Join(seen, "; "))
}

// verifyTagged checks the signatures of the tag sha256-<hex>.sig, as
// cosign 2 writes them: whose signature verified, or what was seen.
func verifyTagged(ctx context.Context, reg *registry.Client, repo, digest, hexDigest string, p *Policy) (string, []string, error) {
	ref, err := reg.ParseReference(repo + ":sha256-" + hexDigest + ".sig")
	if err != nil {
		return "", nil, err
	}
	img, err := reg.Image(ctx, ref)
	if err != nil {
		if errors.Is(err, registry.ErrNotFound) || strings.Contains(err.Error(), "MANIFEST_UNKNOWN") || strings.Contains(err.Error(), "NAME_UNKNOWN") {
			return "", nil, nil
		}
		return "", nil, fmt.Errorf("reading its signatures %s: %w", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return "", nil, fmt.Errorf("reading its signatures %s: %w", ref, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return "", nil, fmt.Errorf("reading its signatures %s: %w", ref, err)
	}
	var seen []string
	for i, desc := range m.Layers {
		if i >= len(layers) || i >= maxSignatures {
			break
		}
		sig, err := base64.StdEncoding.DecodeString(desc.Annotations[SignatureAnnotation])
		if err != nil || len(sig) == 0 {
			continue
		}
		data, err := readLayer(layers[i])
		if err != nil {
			if errors.Is(err, errTooLarge) {
				seen = append(seen, "one too large to read")
				continue
			}
			return "", nil, fmt.Errorf("reading signature %d of %s: %w", i, ref, err)
		}
		e, err := legacyEntity(desc.Annotations, data, sig, p.Identity != nil)
		if err != nil {
			seen = append(seen, err.Error())
			continue
		}
		by, err := p.verifyEntity(e, func() verify.ArtifactPolicyOption { return verify.WithArtifact(bytes.NewReader(data)) })
		if err != nil {
			seen = append(seen, err.Error())
			continue
		}
		var pl payload
		if err := json.Unmarshal(data, &pl); err != nil || pl.Critical.Type != "cosign container image signature" {
			seen = append(seen, "one not of an image")
			continue
		}
		if pl.Critical.Image.Digest != digest {
			seen = append(seen, "one for "+pl.Critical.Image.Digest)
			continue
		}
		return by, nil, nil
	}
	if len(seen) == 0 {
		seen = append(seen, "an empty "+ref.String())
	}
	return "", seen, nil
}

var errTooLarge = errors.New("too large to read")

// readLayer reads a signature layer, bounded.
func readLayer(l interface{ Compressed() (io.ReadCloser, error) }) ([]byte, error) {
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxPayload+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPayload {
		return nil, errTooLarge
	}
	return data, nil
}
