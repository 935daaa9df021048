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
	pol := &Policy{Keys: keys, Name: "key of Secret ci"}
	ctx := context.Background()
	repo := reg.Host + "/team/web"

	signed := reg.Push(t, "team/web:signed")
	testenv.CosignSign(t, reg, "team/web", signed, signed, trusted)
	if by, err := VerifyCosign(ctx, c, repo, signed, pol); err != nil || by != "key of Secret ci" {
		t.Errorf("a signed digest: %q, %v", by, err)
	}

	unsigned := reg.Push(t, "team/web:unsigned")
	if _, err := VerifyCosign(ctx, c, repo, unsigned, pol); err == nil || !strings.Contains(err.Error(), "no cosign signature") {
		t.Errorf("an unsigned digest: %v", err)
	}

	byOther := reg.Push(t, "team/web:other")
	testenv.CosignSign(t, reg, "team/web", byOther, byOther, other)
	if _, err := VerifyCosign(ctx, c, repo, byOther, pol); err == nil || !strings.Contains(err.Error(), "one by another key") {
		t.Errorf("a digest signed by another key: %v", err)
	}

	// A signature moved from another digest (the payload names it) does
	// not vouch for this one.
	moved := reg.Push(t, "team/web:moved")
	testenv.CosignSign(t, reg, "team/web", moved, signed, trusted)
	if _, err := VerifyCosign(ctx, c, repo, moved, pol); err == nil || !strings.Contains(err.Error(), "one for "+signed) {
		t.Errorf("a signature of another digest: %v", err)
	}

	if _, err := ParseKeys([]byte("nope")); err == nil {
		t.Error("no key: no error")
	}
}

// A digest found signed is not read again; one not found signed is, so
// that a signature pushed next counts at once.
func TestVerifiedDigestsAreRemembered(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keys, _ := ParseKeys(testenv.CosignPublicKey(t, key))
	pol := &Policy{Keys: keys}
	ctx := context.Background()
	repo := reg.Host + "/team/web"
	d := reg.Push(t, "team/web:v1")
	v := &Verified{}
	if _, err := v.Verify(ctx, c, repo, d, pol); err == nil {
		t.Fatal("an unsigned digest verified")
	}
	testenv.CosignSign(t, reg, "team/web", d, d, key)
	if _, err := v.Verify(ctx, c, repo, d, pol); err != nil {
		t.Fatalf("signed since: %v", err)
	}
	before := reg.Requests.Load()
	if _, err := v.Verify(ctx, c, repo, d, pol); err != nil || reg.Requests.Load() != before {
		t.Errorf("again: %v, %d requests", err, reg.Requests.Load()-before)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKeys, _ := ParseKeys(testenv.CosignPublicKey(t, other))
	if _, err := v.Verify(ctx, c, repo, d, &Policy{Keys: otherKeys}); err == nil {
		t.Error("remembered for other keys")
	}
}
