package imagesig

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

// Images signed by the real Notation CLI (a test key and certificate it
// makes, `notation cert generate-test`), in both its envelope formats,
// pin under a trust policy trusting that certificate; an unsigned image,
// one signed by a certificate no trust store holds, one whose signer the
// policy's trusted identities leave out, one outside the policy's
// registry scopes, and one under a policy that skips verification do not.
func TestImagesSignedByTheRealNotationCLI(t *testing.T) {
	reg := testenv.NewRegistry(t)
	c := registry.New()
	ctx := context.Background()
	cli := testenv.NewNotationCLI(t, "sluice.test", "mallory.test")
	policy := func(scope, level, identity string) []byte {
		return fmt.Appendf(nil, `{"version":"1.0","trustPolicies":[{"name":"web","registryScopes":[%q],"signatureVerification":{"level":%q},"trustStores":["ca:sluice"],"trustedIdentities":[%q]}]}`,
			scope, level, identity)
	}
	trusted := map[string][]byte{"sluice.test.crt": cli.Certificate(t, "sluice.test")}
	parse := func(p []byte) *Notation {
		t.Helper()
		n, err := ParseNotation(p, trusted)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	strict := parse(policy(reg.Host+"/team/web", "strict", "*"))
	sign := func(tag string, args ...string) string {
		d := reg.Push(t, "team/web:"+tag)
		cli.Sign(t, reg, "team/web", d, args...)
		return d
	}
	verify := func(d string, n *Notation) (string, error) {
		return Verify(ctx, c, reg.Host+"/team/web", d, &Policy{Notation: n})
	}

	for _, format := range []string{"jws", "cose"} {
		d := sign(format, "--signature-format", format)
		if by, err := verify(d, strict); err != nil || !strings.Contains(by, "CN=sluice.test") {
			t.Errorf("signed in %s: %q, %v", format, by, err)
		}
	}
	signed := sign("signed")
	cases := []struct {
		name, digest string
		n            *Notation
		want         string
	}{
		{"unsigned", reg.Push(t, "team/web:unsigned"), strict, "no signature is associated"},
		{"signed by a certificate no trust store holds", sign("mallory", "--key", "mallory.test"), strict, "does not contain any trusted certificate"},
		{"a signer the trusted identities leave out", signed, parse(policy(reg.Host+"/team/web", "strict", "x509.subject: CN=someone.else,O=Notary,L=Seattle,ST=WA,C=US")), "does not match the X.509 trusted identities"},
		{"outside the policy's registry scopes", signed, parse(policy(reg.Host+"/team/other", "strict", "*")), "has no applicable trust policy statement"},
		{"a policy that skips verification", signed, parse([]byte(`{"version":"1.0","trustPolicies":[{"name":"all","registryScopes":["*"],"signatureVerification":{"level":"skip"}}]}`)), "skips verification"},
	}
	// Under audit and permissive, notation-go only logs a signer no
	// trust store holds, and calls the signature verified: Sluice refuses
	// it whatever the level, and still pins an image that carries a
	// trusted signature beside the untrusted one.
	mallory := sign("mallory-only", "--key", "mallory.test")
	both := sign("both", "--key", "mallory.test")
	cli.Sign(t, reg, "team/web", both)
	for _, level := range []string{"audit", "permissive"} {
		n := parse(policy(reg.Host+"/team/web", level, "*"))
		cases = append(cases, struct {
			name, digest string
			n            *Notation
			want         string
		}{"signed by a certificate no trust store holds, " + level, mallory, n, "does not contain any trusted certificate"})
		if by, err := verify(both, n); err != nil || !strings.Contains(by, "CN=sluice.test") {
			t.Errorf("%s: an untrusted and a trusted signature: %q, %v; want the trusted one's signer", level, by, err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if by, err := verify(tc.digest, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, %v; want an error saying %q", by, err, tc.want)
			}
		})
	}

	// Trust policies and stores that are no such thing.
	for _, tc := range []struct {
		policy string
		certs  map[string][]byte
		want   string
	}{
		{"", trusted, "no trustpolicy.json"},
		{"{", trusted, "trustpolicy.json"},
		{`{"version":"1.0","trustPolicies":[]}`, trusted, "trustpolicy.json"},
		{string(policy("*", "strict", "*")), nil, "no certificate"},
		{string(policy("*", "strict", "*")), map[string][]byte{"a.crt": []byte("nope")}, "a.crt: no certificate"},
	} {
		if _, err := ParseNotation([]byte(tc.policy), tc.certs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("policy %q: %v, want %q", tc.policy, err, tc.want)
		}
	}
}
