package imagesig

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

// The public instance's trusted root comes from its TUF repository (here
// one on loopback, trusted by its own first root): a signature of the
// instance the repository publishes verifies; after a key rotation (a new
// trusted_root.json published) the next fetch trusts the new instance and
// no longer the old; with the repository down, the cached copy stands
// while its metadata has not expired, and with no cache either the root
// embedded in Sluice does, said in the log. A root in use past its period
// is fetched again behind the checks.
func TestThePublicRootFollowsItsTUFRepository(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	ctx := context.Background()
	repo := testenv.NewTUFRepo(t)
	before, after := testenv.NewVirtualSigstore(t), testenv.NewVirtualSigstore(t)
	repo.Publish(t, "trusted_root.json", before.TrustedRoot(t))
	const signer = "release@team.example"
	id, _ := NewIdentity(ghIssuer, "", signer, "")
	oldSig, newSig := reg.Push(t, "team/web:old"), reg.Push(t, "team/web:new")
	before.SignBundle(t, reg, "team/web", oldSig, testenv.BundleOptions{Identity: signer, Issuer: ghIssuer})
	after.SignBundle(t, reg, "team/web", newSig, testenv.BundleOptions{Identity: signer, Issuer: ghIssuer, RekorV2: true})
	check := func(p *PublicRoot, digest string) error {
		_, err := VerifyCosign(ctx, c, reg.Host+"/team/web", digest, &Policy{Identity: id, Root: p.Root(ctx)})
		return err
	}
	cache := t.TempDir()
	var log testenv.Buffer
	public := func(dir string) *PublicRoot {
		return &PublicRoot{CacheDir: dir, Mirror: repo.URL, TUFRoot: repo.Root(), Period: time.Hour, Log: slog.New(slog.NewTextHandler(&log, nil))}
	}

	p := public(cache)
	if err := check(p, oldSig); err != nil {
		t.Fatalf("under the root the repository publishes: %v", err)
	}
	if err := check(p, newSig); err == nil || !strings.Contains(err.Error(), "does not list") {
		t.Fatalf("another instance's signature: %v", err)
	}
	served := repo.Requests.Load()
	if err := check(p, oldSig); err != nil || repo.Requests.Load() != served {
		t.Errorf("within its period the root is not fetched again: %v, %d requests", err, repo.Requests.Load()-served)
	}

	// The keys rotate: the next process (or day) trusts the new instance.
	repo.Publish(t, "trusted_root.json", after.TrustedRoot(t))
	p = public(cache)
	if err := check(p, newSig); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	if err := check(p, oldSig); err == nil {
		t.Fatal("after the rotation the old instance's signature still verifies")
	}

	// Offline: the cached copy, while its metadata has not expired.
	repo.Down(true)
	p = public(cache)
	if err := check(p, newSig); err != nil {
		t.Fatalf("offline, from the cache: %v", err)
	}
	if log.String() != "" {
		t.Errorf("the cache stood in, yet the log says:\n%s", log.String())
	}
	// Offline with no cache: the embedded root, and the log says so.
	p = public(t.TempDir())
	if r := p.Root(ctx); r != PublicGood() {
		t.Fatal("offline with no cache, the root is not the embedded one")
	}
	if !strings.Contains(log.String(), "could not be fetched") || !strings.Contains(log.String(), repo.URL) {
		t.Errorf("the log does not say the embedded root stands in:\n%s", log.String())
	}

	// Past its period a root is fetched again, behind the checks.
	repo.Down(false)
	repo.Publish(t, "trusted_root.json", before.TrustedRoot(t))
	p = public(t.TempDir())
	p.Period = 50 * time.Millisecond
	if err := check(p, oldSig); err != nil {
		t.Fatal(err)
	}
	repo.Publish(t, "trusted_root.json", after.TrustedRoot(t))
	time.Sleep(100 * time.Millisecond)
	p.Root(ctx) // due: the refresh starts, this check keeps the old root
	deadline := time.Now().Add(10 * time.Second)
	for check(p, newSig) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the root in use past its period was never fetched again")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A repository that serves a trusted root its metadata does not name (a
// mirror tampered with) is refused by TUF, for its hash: the embedded root
// stands in.
func TestATamperedTUFTargetIsRefused(t *testing.T) {
	repo := testenv.NewTUFRepo(t)
	vs := testenv.NewVirtualSigstore(t)
	repo.Publish(t, "trusted_root.json", vs.TrustedRoot(t))
	repo.Tamper(t, "trusted_root.json", testenv.NewVirtualSigstore(t).TrustedRoot(t))
	var log testenv.Buffer
	p := &PublicRoot{CacheDir: t.TempDir(), Mirror: repo.URL, TUFRoot: repo.Root(), Log: slog.New(slog.NewTextHandler(&log, nil))}
	if r := p.Root(context.Background()); r != PublicGood() {
		t.Fatal("a tampered trusted root was taken")
	}
	// Refused for the tampering (TUF checks a target's length, then its
	// hash, against its metadata: a tampered root of another length fails
	// the first), not for any failure to fetch (a mirror down would fall
	// back the same way).
	refused := strings.Contains(log.String(), "hash verification failed") || strings.Contains(log.String(), "download length mismatch")
	if !strings.Contains(log.String(), "could not be fetched") || !refused {
		t.Errorf("want the trusted root refused for its length or hash; log:\n%s", log.String())
	}
}
