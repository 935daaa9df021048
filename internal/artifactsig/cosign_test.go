package artifactsig

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { testenv.RunWithControlPlane(m, &cp) }

// keyPair makes a key pair with the real cosign CLI (`cosign
// generate-key-pair`, password-encrypted) and returns the directory
// holding cosign.key and cosign.pub, and the password.
func keyPair(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(testenv.CosignBinary(t), "generate-key-pair")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=correct horse")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return dir, "correct horse"
}

func loadKey(t *testing.T, dir, password string) *Key {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "cosign.key"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(data, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// cosignVerify runs the real `cosign verify --key` on ref.
func cosignVerify(t *testing.T, pub, ref string) (string, error) {
	t.Helper()
	out, err := exec.Command(testenv.CosignBinary(t), "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry", ref).CombinedOutput()
	return string(out), err
}

// A key cosign made signs an artifact, and the real `cosign verify` with
// its public key accepts the signature; another key's public key, an
// unsigned artifact, and a wrong password are refused.
func TestTheRealCosignVerifiesTheSignature(t *testing.T) {
	dir, password := keyPair(t)
	key := loadKey(t, dir, password)
	if pub, err := key.PublicKeyPEM(); err != nil || !strings.Contains(string(pub), "PUBLIC KEY") {
		t.Errorf("the public key: %s %v", pub, err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "cosign.key")); true {
		if _, err := ParseKey(data, []byte("wrong")); err == nil || !strings.Contains(err.Error(), "wrong password") {
			t.Errorf("a wrong password: %v", err)
		}
	}
	reg := testenv.NewRegistry(t)
	tag, err := name.NewTag(reg.Host+"/team/deploy:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n")}, ociartifact.Meta{Source: "https://git.example.com/app.git", Revision: "main@sha1:" + strings.Repeat("a", 40)})
	res, err := ociartifact.Push(context.Background(), tag, img, ociartifact.PushOptions{BeforeTag: func(ctx context.Context, ref name.Digest) error {
		_, err := SignCosign(ctx, ref, key)
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	ref := tag.Context().Digest(res.Digest.String()).String()
	if out, err := cosignVerify(t, filepath.Join(dir, "cosign.pub"), ref); err != nil {
		t.Fatalf("cosign verify refused Sluice's signature: %v\n%s", err, out)
	}
	other, _ := keyPair(t)
	if out, err := cosignVerify(t, filepath.Join(other, "cosign.pub"), ref); err == nil {
		t.Errorf("cosign verify accepted another key's public key:\n%s", out)
	}
	unsigned, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("unsigned: true\n")}, ociartifact.Meta{})
	res2, err := ociartifact.Push(context.Background(), tagOf(t, reg, "team/deploy:unsigned"), unsigned, ociartifact.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cosignVerify(t, filepath.Join(dir, "cosign.pub"), tag.Context().Digest(res2.Digest.String()).String()); err == nil {
		t.Errorf("cosign verify accepted an unsigned artifact:\n%s", out)
	}
}

func tagOf(t *testing.T, reg *testenv.Registry, repoTag string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(reg.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// Flux's source-controller verifies what Sluice signs (spec.verify,
// cosign with the public key): the signed artifact is verified and
// applied; one signed by another key, or not signed, is refused and
// never applied.
func TestFluxVerifiesTheSignedArtifact(t *testing.T) {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns, fluxNS := testenv.Namespace("sig-apps"), testenv.Namespace("sig-flux")
	for _, n := range []string{ns, fluxNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	dir, password := keyPair(t)
	key := loadKey(t, dir, password)
	otherDir, otherPassword := keyPair(t)
	other := loadKey(t, otherDir, otherPassword)
	pub, _ := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign-pub", Namespace: fluxNS}, Data: map[string][]byte{"cosign.pub": pub}}); err != nil {
		t.Fatal(err)
	}
	reg := testenv.NewRegistry(t)
	push := func(repoTag, color string, by *Key) string {
		img, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + repoTag[strings.LastIndex(repoTag, ":")+1:] + "}\ndata: {color: " + color + "}\n")}, ociartifact.Meta{})
		o := ociartifact.PushOptions{}
		if by != nil {
			o.BeforeTag = func(ctx context.Context, ref name.Digest) error { _, err := SignCosign(ctx, ref, by); return err }
		}
		res, err := ociartifact.Push(ctx, tagOf(t, reg, repoTag), img, o)
		if err != nil {
			t.Fatal(err)
		}
		return res.Digest.String()
	}
	signed := push("team/deploy:signed", "blue", key)
	push("team/deploy:forged", "red", other)
	push("team/deploy:unsigned", "red", nil)
	var objs string
	for _, tag := range []string{"signed", "forged", "unsigned"} {
		objs += strings.NewReplacer("TAG", tag, "FLUXNS", fluxNS, "NS", ns, "URL", "oci://"+reg.Host+"/team/deploy").Replace(`---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: TAG, namespace: FLUXNS}
spec:
  interval: 1s
  url: URL
  ref: {tag: TAG}
  insecure: true
  verify: {provider: cosign, secretRef: {name: cosign-pub}}
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
`)
	}
	for _, doc := range strings.Split(objs, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	f := testenv.StartFlux(t, cp.Kubeconfig, fluxNS)
	f.WaitApplied(t, c, "signed", "signed@"+signed)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "signed"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the signed artifact was not applied: %v", err)
	}
	for _, tag := range []string{"forged", "unsigned"} {
		deadline := time.Now().Add(30 * time.Second)
		msg := ""
		for time.Now().Before(deadline) {
			msg = verified(t, c, fluxNS, tag)
			if strings.HasPrefix(msg, "False") {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if !strings.HasPrefix(msg, "False") {
			t.Errorf("OCIRepository %s: SourceVerified %q, want False\n%s", tag, msg, f.Logs(20))
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tag}, &corev1.ConfigMap{}); err == nil {
			t.Errorf("the %s artifact was applied", tag)
		}
	}
}

// verified is an OCIRepository's SourceVerified condition, as "Status:
// message".
func verified(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	u.SetKind("OCIRepository")
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conds {
		if m, _ := cond.(map[string]any); m["type"] == "SourceVerified" {
			return fmt.Sprintf("%v: %v", m["status"], m["message"])
		}
	}
	return ""
}

// The provenance of a hydration, attested with the key, is what the real
// `cosign verify-attestation --type slsaprovenance1` accepts and prints:
// the syncs, their source commits and folders, every pinned image as a
// resolved dependency, Sluice's version, each folder's record; another
// key's public key is refused.
func TestTheRealCosignVerifiesTheProvenance(t *testing.T) {
	dir, password := keyPair(t)
	key := loadKey(t, dir, password)
	reg := testenv.NewRegistry(t)
	tag := tagOf(t, reg, "team/deploy:dev")
	commit := strings.Repeat("c", 40)
	img, _ := ociartifact.Pack(map[string][]byte{"apps/web/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n")}, ociartifact.Meta{Source: "https://git.example.com/app.git", Revision: "main@sha1:" + commit})
	prov := Provenance{Version: "v0.1.0", InvocationID: "team/web@1", Started: time.Unix(1765000000, 0), Finished: time.Unix(1765000002, 0), Syncs: []SyncProvenance{{
		Name: "team/web", Folder: "apps/web", Repo: "https://git.example.com/app.git", Ref: "main", Commit: commit, Paths: []string{"overlays/dev", "base"},
		Images: []PinnedImage{{Name: "ghcr.io/acme/web", Digest: "sha256:" + strings.Repeat("d", 64)}},
		Render: map[string]any{"deployer": "flux"}, Record: []byte("apiVersion: sluice.dev/v1alpha1\nkind: Provenance\nsync: web\n"),
	}}}
	predicate, err := prov.Predicate()
	if err != nil {
		t.Fatal(err)
	}
	res, err := ociartifact.Push(context.Background(), tag, img, ociartifact.PushOptions{BeforeTag: func(ctx context.Context, ref name.Digest) error {
		if _, err := SignCosign(ctx, ref, key); err != nil {
			return err
		}
		_, err := Attest(ctx, ref, key, SLSAPredicate, predicate)
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	ref := tag.Context().Digest(res.Digest.String()).String()
	verify := func(pub string) (string, error) {
		return testenv.CosignVerify(t, ref, "slsaprovenance1", nil, "--key", pub, "--insecure-ignore-tlog")
	}
	payload, err := verify(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatalf("cosign verify-attestation refused Sluice's provenance: %v", err)
	}
	for _, want := range []string{`"predicateType":"https://slsa.dev/provenance/v1"`, strings.TrimPrefix(res.Digest.String(), "sha256:"), `"gitCommit":"` + commit, `oci://ghcr.io/acme/web`, strings.Repeat("d", 64), `"sluice":"v0.1.0"`, `"folder":"apps/web"`, `"overlays/dev"`, `"deployer":"flux"`, base64.StdEncoding.EncodeToString(prov.Syncs[0].Record)} {
		if !strings.Contains(payload, want) {
			t.Errorf("the verified provenance lacks %s:\n%s", want, payload)
		}
	}
	other, _ := keyPair(t)
	if out, err := verify(filepath.Join(other, "cosign.pub")); err == nil {
		t.Errorf("cosign verify-attestation accepted another key:\n%s", out)
	}
	// The cosign signature beside it still verifies.
	if out, err := cosignVerify(t, filepath.Join(dir, "cosign.pub"), ref); err != nil {
		t.Errorf("cosign verify with the provenance attached: %v\n%s", err, out)
	}
	if _, err := (Provenance{Syncs: []SyncProvenance{{Name: "x", Images: []PinnedImage{{Name: "a", Digest: "nodigest"}}}}}).Predicate(); err == nil || !strings.Contains(err.Error(), `"nodigest"`) {
		t.Errorf("an image without a digest: %v", err)
	}
}
