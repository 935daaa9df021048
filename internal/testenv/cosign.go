package testenv

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CosignSign adds a cosign signature by key of the payload naming
// signedDigest, at the place of digest (the two differ only to forge a
// moved signature), laid out as `cosign sign --key` writes it: the tag
// sha256-<hex>.sig of repo (without host), one layer of simple-signing
// payload, its signature in the layer's dev.cosignproject.cosign/signature
// annotation.
func CosignSign(t TB, reg *Registry, repo, digest, signedDigest string, key *ecdsa.PrivateKey) {
	t.Helper()
	payload := fmt.Sprintf(`{"critical":{"identity":{"docker-reference":%q},"image":{"docker-manifest-digest":%q},"type":"cosign container image signature"},"optional":null}`, reg.Host+"/"+repo, signedDigest)
	h := sha256.Sum256([]byte(payload))
	sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	if err != nil {
		t.Fatalf("%v", err)
	}
	appendSignature(t, reg, repo, digest, []byte(payload), map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)})
}

// appendSignature adds a layer of payload to the signatures of
// repo@digest, as cosign does: the signature image at the tag
// sha256-<hex>.sig grows by one layer (it is made when there is none).
func appendSignature(t TB, reg *Registry, repo, digest string, payload []byte, annotations map[string]string) {
	t.Helper()
	tag := repo + ":sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sig"
	base := mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1)
	if ref, err := name.ParseReference(reg.Host + "/" + tag); err == nil {
		if img, err := remote.Image(ref); err == nil {
			base = img
		}
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: static.NewLayer(payload, "application/vnd.dev.cosign.simplesigning.v1+json"), Annotations: annotations,
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	reg.PushImage(t, tag, img)
}

// CosignPublicKey is key's public half as cosign.pub holds it.
func CosignPublicKey(t TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}
