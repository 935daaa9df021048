package artifactsig

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/testenv"
)

// Keyless signing as the controller does it: the service account's
// token of audience sigstore (from the test API server, a real OIDC
// issuer), a certificate from the real Fulcio trusting that cluster, a
// timestamp from the real timestamp authority. The real cosign verify
// and verify-attestation accept the signature and the provenance for
// that identity and issuer, and refuse them for another identity; a
// token of another audience gets no certificate, and the tag never
// moves.
func TestKeylessSigningWithTheServiceAccountsToken(t *testing.T) {
	ctx := context.Background()
	kc, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace("keyless")
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sig := testenv.StartClusterSigstore(t, cp)
	reg := testenv.NewRegistry(t)
	predicate, err := Provenance{Version: "v0.1.0-test", Syncs: []SyncProvenance{{Name: ns + "/web", Folder: "apps/web"}}}.Predicate()
	if err != nil {
		t.Fatal(err)
	}
	push := func(tagName, tokenFile string) (string, error) {
		tag, _ := name.NewTag(reg.Host+"/team/deploy:"+tagName, name.Insecure)
		img, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + tagName + "}\n")}, ociartifact.Meta{})
		signer := KeylessSigner(Keyless{FulcioURL: sig.Fulcio.URL, TimestampURL: sig.TSA.URL, RekorURL: sig.Rekor.URL, Token: TokenFile(tokenFile)})
		res, err := ociartifact.Push(ctx, tag, img, ociartifact.PushOptions{BeforeTag: func(ctx context.Context, ref name.Digest) error {
			return signer.Sign(ctx, Target{Ref: ref}, SLSAPredicate, predicate)
		}})
		return res.Digest.String(), err
	}
	digest, err := push("dev", sig.Token(t, ns, "sluice-controller", Audience))
	if err != nil {
		t.Fatal(err)
	}
	ref, identity := reg.Host+"/team/deploy@"+digest, sig.Identity(ns, "sluice-controller")
	if _, err := testenv.CosignVerify(t, ref, "", nil, sig.VerifyArgs(identity)...); err != nil {
		t.Error(err)
	}
	payload, err := testenv.CosignVerify(t, ref, "slsaprovenance1", nil, sig.VerifyArgs(identity)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(payload, `"name":"`+ns+`/web"`) {
		t.Errorf("the provenance lacks the sync:\n%s", payload)
	}
	if _, err := testenv.CosignVerify(t, ref, "", nil, sig.VerifyArgs(sig.Identity(ns, "other"))...); err == nil {
		t.Error("cosign verify accepted the signature for another identity")
	}

	// A token for another audience: Fulcio refuses it, and the tag
	// never moves.
	_, err = push("wrong-audience", sig.Token(t, ns, "sluice-controller", "vault"))
	if err == nil || !strings.Contains(err.Error(), "Fulcio") {
		t.Errorf("a token of another audience: %v, want Fulcio's refusal", err)
	}
	tag, _ := name.NewTag(reg.Host+"/team/deploy:wrong-audience", name.Insecure)
	if _, _, _, found, _ := ociartifact.Read(ctx, tag, ociartifact.DefaultLimits()); found {
		t.Error("the tag moved to an artifact that was not signed")
	}
}
