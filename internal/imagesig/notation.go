package imagesig

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	_ "github.com/notaryproject/notation-core-go/signature/cose" // the envelope formats notation signs in
	_ "github.com/notaryproject/notation-core-go/signature/jws"
	"github.com/notaryproject/notation-go"
	notationlog "github.com/notaryproject/notation-go/log"
	notationregistry "github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"

	"sluice.dev/sluice/internal/registry"
)

// TrustPolicyKey is the key of a Notation Secret holding the trust
// policy document, as Flux's OCIRepository reads it; every other key
// ending .crt or .pem holds certificates of its trust stores.
const TrustPolicyKey = "trustpolicy.json"

// Notation is what a Notation check trusts: a trust policy document
// (`notation policy show`'s trustpolicy.json) and the certificates its
// trust stores hold. As Flux reads a Notation Secret, every trust store
// the policy names holds all the certificates given.
type Notation struct {
	policy *trustpolicy.Document
	certs  []*x509.Certificate
	sum    string
}

// ParseNotation reads a trust policy document and certificate files
// (PEM or DER), by name: as a Secret's data holds them, or the command
// line's files.
func ParseNotation(policy []byte, certs map[string][]byte) (*Notation, error) {
	var doc trustpolicy.Document
	if len(policy) == 0 {
		return nil, fmt.Errorf("no %s (the Notation trust policy)", TrustPolicyKey)
	}
	if err := json.Unmarshal(policy, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", TrustPolicyKey, err)
	}
	if err := doc.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", TrustPolicyKey, err)
	}
	// Under audit and permissive, notation-go only logs a signer no trust
	// store holds and calls the signature verified (and stops there, an
	// image's trusted signature behind it unread). Sluice pins only what a
	// trusted signer signed, whatever the level: authenticity is enforced
	// in every statement that verifies at all (integrity always is).
	for i := range doc.TrustPolicies {
		sv := &doc.TrustPolicies[i].SignatureVerification
		if sv.VerificationLevel == trustpolicy.LevelSkip.Name {
			continue
		}
		if sv.Override == nil {
			sv.Override = map[trustpolicy.ValidationType]trustpolicy.ValidationAction{}
		}
		sv.Override[trustpolicy.TypeAuthenticity] = trustpolicy.ActionEnforce
	}
	h := sha256.New()
	h.Write(policy)
	n := &Notation{policy: &doc}
	names := make([]string, 0, len(certs))
	for k := range certs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if ext := path.Ext(k); ext != ".crt" && ext != ".pem" {
			continue
		}
		data := certs[k]
		var parsed []*x509.Certificate
		for rest := data; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			parsed = append(parsed, c)
		}
		if len(parsed) == 0 {
			c, err := x509.ParseCertificates(data)
			if err != nil || len(c) == 0 {
				return nil, fmt.Errorf("%s: no certificate (PEM or DER)", k)
			}
			parsed = c
		}
		n.certs = append(n.certs, parsed...)
		h.Write([]byte(k))
		h.Write(data)
	}
	if len(n.certs) == 0 {
		return nil, errors.New("no certificate for the trust stores (keys ending .crt or .pem)")
	}
	n.sum = hex.EncodeToString(h.Sum(nil))
	return n, nil
}

// LoadNotation reads the command line's Notation trust policy and
// certificate files; nil when no policy is given.
func LoadNotation(policyFile string, certFiles []string) (*Notation, error) {
	if policyFile == "" {
		if len(certFiles) > 0 {
			return nil, errors.New("--notation-cert: give the trust policy too (--notation-trust-policy)")
		}
		return nil, nil
	}
	policy, err := os.ReadFile(policyFile)
	if err != nil {
		return nil, fmt.Errorf("--notation-trust-policy: %w", err)
	}
	certs := map[string][]byte{}
	for _, f := range certFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--notation-cert: %w", err)
		}
		name := path.Base(f)
		if ext := path.Ext(name); ext != ".crt" && ext != ".pem" {
			name += ".crt"
		}
		certs[name] = data
	}
	n, err := ParseNotation(policy, certs)
	if err != nil {
		return nil, fmt.Errorf("--notation-trust-policy %s: %w", policyFile, err)
	}
	return n, nil
}

// warnings keeps what notation-go warns of while it verifies (why each
// signature failed), dropping the rest of its log.
type warnings struct {
	notationlog.Logger
	mu sync.Mutex
	w  []string
}

func (w *warnings) Warnf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.w) < maxSignatures {
		w.w = append(w.w, fmt.Sprintf(format, args...))
	}
}

func (w *warnings) Warn(args ...any)   { w.Warnf("%s", fmt.Sprint(args...)) }
func (w *warnings) Warnln(args ...any) { w.Warnf("%s", fmt.Sprintln(args...)) }

func (w *warnings) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.w)
}

// store is every trust store of a policy: the certificates given.
type store []*x509.Certificate

func (s store) GetCertificates(context.Context, truststore.Type, string) ([]*x509.Certificate, error) {
	return s, nil
}

// verifyNotation checks that repo@digest carries a Notation signature
// its trust policy accepts (integrity and authenticity enforced whatever
// the policy's level, as ParseNotation overrides it; expiry and
// revocation as the level says), and says whose: the signing
// certificate's subject.
func verifyNotation(ctx context.Context, reg *registry.Client, repo, digest string, n *Notation) (string, error) {
	v, err := verifier.New(n.policy, store(n.certs), nil)
	if err != nil {
		return "", fmt.Errorf("the Notation trust policy: %w", err)
	}
	o, err := reg.ORASRepository(repo)
	if err != nil {
		return "", err
	}
	ref := o.Reference.Registry + "/" + o.Reference.Repository + "@" + digest
	// notation-go says why each signature failed only in its log.
	warned := &warnings{Logger: notationlog.Discard}
	ctx = notationlog.WithLogger(ctx, warned)
	_, outcomes, err := notation.Verify(ctx, v, notationregistry.NewRepository(o), notation.VerifyOptions{ArtifactReference: ref, MaxSignatureAttempts: maxSignatures})
	if err != nil {
		var none notation.ErrorSignatureRetrievalFailed
		if errors.As(err, &none) || strings.Contains(err.Error(), "no signature is associated") {
			return "", fmt.Errorf("no Notation signature of %s: %v", ref, err)
		}
		if why := warned.list(); len(why) > 0 {
			return "", fmt.Errorf("no Notation signature of %s that its trust policy accepts: %s", ref, strings.Join(why, "; "))
		}
		return "", fmt.Errorf("no Notation signature of %s that its trust policy accepts: %v", ref, err)
	}
	if len(outcomes) == 0 {
		return "", fmt.Errorf("no Notation signature of %s", ref)
	}
	out := outcomes[0]
	if out.VerificationLevel != nil && out.VerificationLevel.Name == trustpolicy.LevelSkip.Name {
		return "", fmt.Errorf("the Notation trust policy skips verification of %s: verify asks for a signature", ref)
	}
	if out.EnvelopeContent == nil || len(out.EnvelopeContent.SignerInfo.CertificateChain) == 0 {
		return "", fmt.Errorf("a Notation signature of %s names no signer", ref)
	}
	return out.EnvelopeContent.SignerInfo.CertificateChain[0].Subject.String(), nil
}
