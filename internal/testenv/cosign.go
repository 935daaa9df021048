package testenv

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
	base := emptySignatureImage()
	if ref, err := name.ParseReference(reg.Host + "/" + tag); err == nil {
		if img, err := remote.Image(ref); err == nil {
			base = img
		}
	}
	pushSignatureLayer(t, reg, tag, base, payload, annotations)
}

// emptySignatureImage is what cosign starts a signature image from.
func emptySignatureImage() v1.Image {
	return mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1)
}

// pushSignatureLayer pushes base with one more layer of payload, with
// annotations, as cosign writes a signature, at tag of reg.
func pushSignatureLayer(t TB, reg *Registry, tag string, base v1.Image, payload []byte, annotations map[string]string) {
	t.Helper()
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

// CosignVerify runs the real `cosign verify` (or, with a predicate type,
// `verify-attestation --type TYPE`) of ref over a registry on loopback
// (a key's signature has no transparency log entry: args say
// --insecure-ignore-tlog), with env
// added to the command's environment; it returns the statement's
// payload a verified attestation holds, and the command's error and
// output when it refused.
func CosignVerify(t TB, ref, predicateType string, env []string, args ...string) (payload string, err error) {
	t.Helper()
	cmdArgs := []string{"verify"}
	if predicateType != "" {
		cmdArgs = []string{"verify-attestation", "--type", predicateType}
	}
	cmdArgs = append(append(cmdArgs, args...), "--allow-http-registry", "--allow-insecure-registry", ref)
	cmd := exec.Command(CosignBinary(t), cmdArgs...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("cosign %s: %w\n%s%s", cmdArgs[0], err, out, stderr.String())
	}
	for _, line := range strings.Split(string(out), "\n") {
		var env struct{ Payload string }
		if json.Unmarshal([]byte(line), &env) == nil && env.Payload != "" {
			data, _ := base64.StdEncoding.DecodeString(env.Payload)
			payload = string(data)
		}
	}
	return payload, nil
}

// ReplaceSignatureLayer makes the signatures of repo@digest (the tag
// sha256-<hex>.sig of repo, without host) one layer: the payload of the
// first layer there now, with annotations: a signature as cosign laid it
// out, tampered with.
func ReplaceSignatureLayer(t TB, reg *Registry, repo, digest string, annotations map[string]string) {
	t.Helper()
	tag := repo + ":sha256-" + strings.TrimPrefix(digest, "sha256:") + ".sig"
	ref, err := name.ParseReference(reg.Host + "/" + tag)
	if err != nil {
		t.Fatalf("%v", err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("reading %s: %v", tag, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("%s has no layer (%v)", tag, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatalf("%v", err)
	}
	payload, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("%v", err)
	}
	pushSignatureLayer(t, reg, tag, emptySignatureImage(), payload, annotations)
}
