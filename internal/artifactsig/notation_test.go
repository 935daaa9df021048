package artifactsig

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	orasremote "oras.land/oras-go/v2/registry/remote"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/testenv"
)

const trustPolicy = `{"version":"1.0","trustPolicies":[{"name":"sluice","registryScopes":["SCOPE"],"signatureVerification":{"level":"strict"},"trustStores":["ca:STORE"],"trustedIdentities":["*"]}]}`

// An artifact Sluice signs with a Notation key and certificate (made by
// the real `notation cert generate-test`) is what the real `notation
// verify` accepts under a strict trust policy of that certificate, and
// what Flux's source-controller (spec.verify, provider notation)
// verifies and applies; one signed by another certificate is refused by
// both, and never applied.
func TestNotationVerifiesTheSignedArtifact(t *testing.T) {
	cli := testenv.NewNotationCLI(t, "sluice", "other")
	key, err := ParseNotationKey(cli.Key(t, "sluice"), cli.Certificate(t, "sluice"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := ParseNotationKey(cli.Key(t, "other"), cli.Certificate(t, "other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseNotationKey(cli.Key(t, "sluice"), []byte("not a certificate")); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("a chain without a certificate: %v", err)
	}
	reg := testenv.NewRegistry(t)
	ctx := context.Background()
	push := func(repoTag, cm string, by *NotationKey) string {
		tag, err := name.NewTag(reg.Host+"/"+repoTag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + cm + "}\n")}, ociartifact.Meta{})
		res, err := ociartifact.Push(ctx, tag, img, ociartifact.PushOptions{BeforeTag: func(ctx context.Context, ref name.Digest) error {
			return SignNotation(ctx, ref, by, NotationOptions{PlainHTTP: true})
		}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Digest.String()
	}
	signed := push("team/deploy:signed", "signed", key)
	push("team/deploy:forged", "forged", other)

	// The real notation CLI, trusting only the sluice certificate.
	policy := filepath.Join(cli.Dir(), "policy.json")
	os.WriteFile(policy, []byte(strings.NewReplacer("SCOPE", reg.Host+"/team/deploy", "STORE", "sluice").Replace(trustPolicy)), 0o644)
	cli.Run(t, "policy", "import", "--force", policy)
	cli.Run(t, "verify", "--insecure-registry", reg.Host+"/team/deploy@"+signed)
	forgedDigest := digestOfTag(t, reg.Host+"/team/deploy:forged")
	cmd := exec.Command(testenv.NotationBinary(t), "verify", "--insecure-registry", reg.Host+"/team/deploy@"+forgedDigest)
	cmd.Env = []string{"HOME=" + cli.Dir(), "XDG_CONFIG_HOME=" + filepath.Join(cli.Dir(), "config"), "PATH=" + os.Getenv("PATH")}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("notation verify accepted another certificate's signature:\n%s", out)
	}

	// Flux's source-controller.
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns, fluxNS := testenv.Namespace("ntn-apps"), testenv.Namespace("ntn-flux")
	for _, n := range []string{ns, fluxNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "notation", Namespace: fluxNS}, Data: map[string][]byte{
		"trustpolicy.json": []byte(strings.NewReplacer("SCOPE", reg.Host+"/team/deploy", "STORE", "sluice").Replace(trustPolicy)),
		"sluice.crt":       cli.Certificate(t, "sluice"),
	}}); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"signed", "forged"} {
		for _, doc := range strings.Split(strings.NewReplacer("TAG", tag, "FLUXNS", fluxNS, "NS", ns, "URL", "oci://"+reg.Host+"/team/deploy").Replace(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: TAG, namespace: FLUXNS}
spec:
  interval: 1s
  url: URL
  ref: {tag: TAG}
  insecure: true
  verify: {provider: notation, secretRef: {name: notation}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: TAG, namespace: FLUXNS}
spec:
  interval: 1s
  retryInterval: 1s
  prune: true
  path: ./apps/web
  targetNamespace: NS
  sourceRef: {kind: OCIRepository, name: TAG}
`), "---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := testenv.StartFlux(t, cp.Kubeconfig, fluxNS)
	f.WaitApplied(t, c, "signed", "signed@"+signed)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "signed"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the signed artifact was not applied: %v", err)
	}
	msg := ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if msg = verified(t, c, fluxNS, "forged"); strings.HasPrefix(msg, "False") {
			break
		}
	}
	if !strings.HasPrefix(msg, "False") {
		t.Errorf("OCIRepository forged: SourceVerified %q, want False\n%s", msg, f.Logs(20))
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "forged"}, &corev1.ConfigMap{}); err == nil {
		t.Errorf("the artifact signed by another certificate was applied")
	}
}

func digestOfTag(t *testing.T, ref string) string {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return digestAt(t, tag)
}

func digestAt(t *testing.T, tag name.Tag) string {
	t.Helper()
	d, err := remote.Head(tag)
	if err != nil {
		t.Fatalf("looking up %s: %v", tag, err)
	}
	return d.Digest.String()
}

// What a sync's spec (provider notation) and --artifact-notation-key
// sign with: the artifact, and its provenance attached as an in-toto
// statement that Notation signs in its turn; the real notation verify
// accepts both under a strict trust policy of the certificate. A key
// that is not the certificate's is refused before anything is pushed.
func TestTheNotationSignerSignsTheArtifactAndItsProvenance(t *testing.T) {
	cli := testenv.NewNotationCLI(t, "sluice", "other")
	if _, err := ParseNotationKey(cli.Key(t, "other"), cli.Certificate(t, "sluice")); err == nil || !strings.Contains(err.Error(), "is not the key of the certificate") {
		t.Errorf("another key than the certificate's: %v", err)
	}
	key, err := ParseNotationKey(cli.Key(t, "sluice"), cli.Certificate(t, "sluice"))
	if err != nil {
		t.Fatal(err)
	}
	reg := testenv.NewRegistry(t)
	ctx := context.Background()
	tag, _ := name.NewTag(reg.Host+"/team/deploy:dev", name.Insecure)
	img, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n")}, ociartifact.Meta{})
	predicate, err := Provenance{Version: "v0.1.0-test", Syncs: []SyncProvenance{{Name: "team/web", Folder: "apps/web", Repo: "https://git.example.com/app.git", Commit: strings.Repeat("a", 40)}}}.Predicate()
	if err != nil {
		t.Fatal(err)
	}
	signer := NotationSigner(key, "the test certificate")
	res, err := ociartifact.Push(ctx, tag, img, ociartifact.PushOptions{BeforeTag: func(ctx context.Context, ref name.Digest) error {
		repo, err := orasremote.NewRepository(ref.Context().Name())
		if err != nil {
			return err
		}
		repo.PlainHTTP = true
		return signer.Sign(ctx, Target{Ref: ref, ORAS: repo}, SLSAPredicate, predicate)
	}})
	if err != nil {
		t.Fatal(err)
	}
	subject := reg.Host + "/team/deploy@" + res.Digest.String()
	subjectRef, _ := name.NewDigest(subject, name.Insecure)
	idx, err := remote.Referrers(subjectRef)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	var statement string
	for _, d := range m.Manifests {
		if d.ArtifactType == InTotoMediaType {
			statement = reg.Host + "/team/deploy@" + d.Digest.String()
		}
	}
	if statement == "" {
		t.Fatalf("no in-toto statement refers to the artifact: %+v", m.Manifests)
	}
	policy := filepath.Join(cli.Dir(), "policy.json")
	os.WriteFile(policy, []byte(strings.NewReplacer("SCOPE", reg.Host+"/team/deploy", "STORE", "sluice").Replace(trustPolicy)), 0o644)
	cli.Run(t, "policy", "import", "--force", policy)
	cli.Run(t, "verify", "--insecure-registry", subject)
	cli.Run(t, "verify", "--insecure-registry", statement)
	statementRef, _ := name.NewDigest(statement, name.Insecure)
	st, err := remote.Image(statementRef)
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := st.Layers()
	rc, _ := layers[0].Uncompressed()
	body, _ := io.ReadAll(rc)
	for _, want := range []string{`"predicateType":"https://slsa.dev/provenance/v1"`, res.Digest.Hex, `"name":"team/web"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the statement lacks %s:\n%s", want, body)
		}
	}
}
