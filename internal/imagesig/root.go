package imagesig

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TrustedRoot is what keyless verification trusts, as Sigstore's
// trusted_root.json lists it: the certificate authorities that issue
// signing certificates (Fulcio), the transparency logs that countersign
// signatures (Rekor) and the certificate transparency logs that countersign
// certificates, each for the time it was valid.
type TrustedRoot struct {
	cas    []authority
	tlogs  map[string]logKey // by hex SHA-256 of the key's DER, Rekor's log ID
	ctlogs map[string]logKey
	sum    string
}

type authority struct {
	roots         *x509.CertPool
	intermediates *x509.CertPool
	start, end    time.Time
}

type logKey struct {
	url        string
	key        crypto.PublicKey
	start, end time.Time
}

func (k logKey) validAt(t time.Time) bool {
	return !t.Before(k.start) && (k.end.IsZero() || !t.After(k.end))
}

// trustedRootJSON is the part of a trusted_root.json Sluice reads
// (application/vnd.dev.sigstore.trustedroot+json).
type trustedRootJSON struct {
	Tlogs []struct {
		BaseURL   string `json:"baseUrl"`
		PublicKey struct {
			RawBytes []byte   `json:"rawBytes"`
			ValidFor validFor `json:"validFor"`
		} `json:"publicKey"`
	} `json:"tlogs"`
	Ctlogs []struct {
		BaseURL   string `json:"baseUrl"`
		PublicKey struct {
			RawBytes []byte   `json:"rawBytes"`
			ValidFor validFor `json:"validFor"`
		} `json:"publicKey"`
	} `json:"ctlogs"`
	CertificateAuthorities []struct {
		URI       string `json:"uri"`
		CertChain struct {
			Certificates []struct {
				RawBytes []byte `json:"rawBytes"`
			} `json:"certificates"`
		} `json:"certChain"`
		ValidFor validFor `json:"validFor"`
	} `json:"certificateAuthorities"`
}

type validFor struct {
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end"`
}

func (v validFor) end() time.Time {
	if v.End == nil {
		return time.Time{}
	}
	return *v.End
}

// ParseTrustedRoot reads a Sigstore trusted_root.json (as `cosign
// verify --trusted-root` takes it, and as a private Fulcio and Rekor
// publish theirs).
func ParseTrustedRoot(data []byte) (*TrustedRoot, error) {
	var j trustedRootJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("not a Sigstore trusted_root.json: %w", err)
	}
	sum := sha256.Sum256(data)
	r := &TrustedRoot{tlogs: map[string]logKey{}, ctlogs: map[string]logKey{}, sum: hex.EncodeToString(sum[:])}
	for i, t := range j.Tlogs {
		k, id, err := parseLogKey(t.PublicKey.RawBytes)
		if err != nil {
			return nil, fmt.Errorf("tlogs[%d] (%s): %w", i, t.BaseURL, err)
		}
		r.tlogs[id] = logKey{url: t.BaseURL, key: k, start: t.PublicKey.ValidFor.Start, end: t.PublicKey.ValidFor.end()}
	}
	for i, t := range j.Ctlogs {
		k, id, err := parseLogKey(t.PublicKey.RawBytes)
		if err != nil {
			return nil, fmt.Errorf("ctlogs[%d] (%s): %w", i, t.BaseURL, err)
		}
		r.ctlogs[id] = logKey{url: t.BaseURL, key: k, start: t.PublicKey.ValidFor.Start, end: t.PublicKey.ValidFor.end()}
	}
	for i, ca := range j.CertificateAuthorities {
		certs := ca.CertChain.Certificates
		if len(certs) == 0 {
			return nil, fmt.Errorf("certificateAuthorities[%d] (%s): no certificate", i, ca.URI)
		}
		a := authority{roots: x509.NewCertPool(), intermediates: x509.NewCertPool(), start: ca.ValidFor.Start, end: ca.ValidFor.end()}
		for k, c := range certs {
			cert, err := x509.ParseCertificate(c.RawBytes)
			if err != nil {
				return nil, fmt.Errorf("certificateAuthorities[%d] (%s) certificate %d: %w", i, ca.URI, k, err)
			}
			if k == len(certs)-1 { // the chain runs from the issuing CA to the root
				a.roots.AddCert(cert)
			} else {
				a.intermediates.AddCert(cert)
			}
		}
		r.cas = append(r.cas, a)
	}
	if len(r.cas) == 0 || len(r.tlogs) == 0 {
		return nil, errors.New("a trusted root needs at least one certificate authority (Fulcio) and one transparency log (Rekor)")
	}
	return r, nil
}

// parseLogKey reads a log's DER public key and its log ID.
func parseLogKey(der []byte) (crypto.PublicKey, string, error) {
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, "", fmt.Errorf("public key: %w", err)
	}
	id := sha256.Sum256(der)
	return k, hex.EncodeToString(id[:]), nil
}

// LoadTrustedRoot reads the CLI's --trusted-root; nil (the public
// Sigstore instance's, read when first needed) when file is empty.
func LoadTrustedRoot(file string) (*TrustedRoot, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--trusted-root: %w", err)
	}
	r, err := ParseTrustedRoot(data)
	if err != nil {
		return nil, fmt.Errorf("--trusted-root %s: %w", file, err)
	}
	return r, nil
}

// publicGood is the trusted root of Sigstore's public instance
// (fulcio.sigstore.dev, rekor.sigstore.dev, ctfe.sigstore.dev), as
// distributed by its TUF repository; see sigstore/LICENSE.
//
//go:embed sigstore/trusted_root.json
var publicGood []byte

var publicGoodOnce = sync.OnceValue(func() *TrustedRoot {
	r, err := ParseTrustedRoot(publicGood)
	if err != nil {
		panic("imagesig: the embedded trusted root: " + err.Error())
	}
	return r
})

// PublicGood is the trusted root of Sigstore's public instance, what
// `cosign verify` trusts unless told otherwise.
func PublicGood() *TrustedRoot { return publicGoodOnce() }
