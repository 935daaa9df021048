package imagesig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

func TestACosignSignatureOfATrustedKeyVerifies(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	trusted, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys, err := ParseKeys(testenv.CosignPublicKey(t, trusted))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := reg.Host + "/team/web"

	signed := reg.Push(t, "team/web:signed")
	testenv.CosignSign(t, reg, "team/web", signed, signed, trusted)
	if err := VerifyCosign(ctx, c, repo, signed, keys); err != nil {
		t.Errorf("a signed digest: %v", err)
	}

	unsigned := reg.Push(t, "team/web:unsigned")
	if err := VerifyCosign(ctx, c, repo, unsigned, keys); err == nil || !strings.Contains(err.Error(), "no cosign signature") {
		t.Errorf("an unsigned digest: %v", err)
	}

	byOther := reg.Push(t, "team/web:other")
	testenv.CosignSign(t, reg, "team/web", byOther, byOther, other)
	if err := VerifyCosign(ctx, c, repo, byOther, keys); err == nil || !strings.Contains(err.Error(), "one by another key") {
		t.Errorf("a digest signed by another key: %v", err)
	}

	// A signature moved from another digest (the payload names it) does
	// not vouch for this one.
	moved := reg.Push(t, "team/web:moved")
	testenv.CosignSign(t, reg, "team/web", moved, signed, trusted)
	if err := VerifyCosign(ctx, c, repo, moved, keys); err == nil || !strings.Contains(err.Error(), "one for "+signed) {
		t.Errorf("a signature of another digest: %v", err)
	}

	if _, err := ParseKeys([]byte("nope")); err == nil {
		t.Error("no key: no error")
	}
}
