package imagesig

import (
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"regexp"
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
