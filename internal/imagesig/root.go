package imagesig

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sigstore/sigstore-go/pkg/root"
)

// TrustedRoot is what keyless verification trusts, as Sigstore's
// trusted_root.json lists it: the certificate authorities that issue
// signing certificates (Fulcio), the transparency logs that countersign
// signatures (Rekor, v1 and v2), the certificate transparency logs that
// countersign certificates and the timestamp authorities, each for the
// time it was valid; read and used by sigstore-go.
type TrustedRoot struct {
	material *root.TrustedRoot
	sum      string
}

// ParseTrustedRoot reads a Sigstore trusted_root.json (as `cosign
// verify --trusted-root` takes it, and as a private Fulcio and Rekor
// publish theirs).
func ParseTrustedRoot(data []byte) (*TrustedRoot, error) {
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not a Sigstore trusted_root.json: %w", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 || len(tr.RekorLogs()) == 0 {
		return nil, errors.New("a trusted root needs at least one certificate authority (Fulcio) and one transparency log (Rekor)")
	}
	sum := sha256.Sum256(data)
	return &TrustedRoot{material: tr, sum: hex.EncodeToString(sum[:])}, nil
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
