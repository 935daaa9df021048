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

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CosignSign pushes a cosign signature by key of the payload naming
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
	layer := static.NewLayer([]byte(payload), "application/vnd.dev.cosign.simplesigning.v1+json")
	img, err := mutate.Append(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), mutate.Addendum{
		Layer: layer, Annotations: map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	reg.PushImage(t, repo+":sha256-"+strings.TrimPrefix(digest, "sha256:")+".sig", img)
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
