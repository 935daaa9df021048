package secrets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

const rendered = `apiVersion: v1
kind: Secret
metadata:
  name: grafana
  namespace: monitoring
  labels: {app: grafana}
type: Opaque
data:
  admin-user: YWRtaW4=
  admin-password: c2VjcmV0LXZhbHVlLTQy
---
apiVersion: v1
kind: ConfigMap
metadata: {name: grafana, namespace: monitoring}
data: {grafana.ini: "[server]"}
`

func objects(t *testing.T, s string) []*yaml.RNode {
	t.Helper()
	objs, err := kio.FromBytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func identity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

var key = []byte("the sync's own key, 32 bytes....")

// decrypt decrypts a sealed object with the real sops CLI and an age
// identity, as a person (or kustomize-controller, by the same library)
// would.
func decrypt(t *testing.T, obj *yaml.RNode, id *age.X25519Identity) map[string]any {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(f, []byte(obj.MustString()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.SOPSBinary(t), "decrypt", "--output-type", "json", f)
	cmd.Env = []string{"SOPS_AGE_KEY=" + id.String(), "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops decrypt: %v: %s", err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A Secret is committed encrypted for the recipients, its values
// unreadable in the file, and the real sops decrypts it to exactly the
// rendered Secret; the other objects pass as they are.
func TestASecretIsCommittedEncryptedForItsRecipients(t *testing.T) {
	id, other := identity(t), identity(t)
	o := Options{Recipients: &v1alpha1.SOPS{Age: []string{id.Recipient().String(), other.Recipient().String()}}, Key: key}
	sealed, err := Seal(context.Background(), objects(t, rendered), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed.Objects) != 2 || sealed.Encrypted != 1 {
		t.Fatalf("%d objects, %d encrypted", len(sealed.Objects), sealed.Encrypted)
	}
	file := sealed.Objects[0].MustString()
	for _, secret := range []string{"c2VjcmV0LXZhbHVlLTQy", "secret-value-42"} {
		if strings.Contains(file, secret) {
			t.Fatalf("the committed file holds the value:\n%s", file)
		}
	}
	for _, readable := range []string{"name: grafana", "namespace: monitoring", "admin-password: ENC[AES256_GCM,", "mac_only_encrypted: true"} {
		if !strings.Contains(file, readable) {
			t.Errorf("the committed file does not hold %q:\n%s", readable, file)
		}
	}
	for _, who := range []*age.X25519Identity{id, other} {
		got := decrypt(t, sealed.Objects[0], who)
		want := map[string]any{}
		plain, _ := canonical(objects(t, rendered)[0])
		json.Unmarshal(plain, &want)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Errorf("sops decrypts\n%s\nnot the rendered\n%s", g, w)
		}
	}
	if sealed.Objects[1].GetKind() != "ConfigMap" || strings.Contains(sealed.Objects[1].MustString(), "sops") {
		t.Errorf("the ConfigMap changed: %s", sealed.Objects[1].MustString())
	}
	r := sealed.Records[0]
	if r.Object != "Secret monitoring/grafana" || r.Committed != v1alpha1.SecretEncrypted || strings.Join(r.Keys, ",") != "admin-password,admin-user" || !strings.HasPrefix(r.Digest, "hmac-sha256:") {
		t.Errorf("record %+v", r)
	}
}

// An unchanged Secret keeps the encrypted form it was committed in, byte
// for byte; a changed one, or one for other recipients, is encrypted anew.
func TestAnUnchangedSecretIsNotEncryptedAgain(t *testing.T) {
	id := identity(t)
	o := Options{Recipients: &v1alpha1.SOPS{Age: []string{id.Recipient().String()}}, Key: key}
	first, err := Seal(context.Background(), objects(t, rendered), o)
	if err != nil {
		t.Fatal(err)
	}
	// The next hydration reads the folder back from its file.
	prev := objects(t, first.Objects[0].MustString())[0]
	o.Previous, o.Records = map[string]*yaml.RNode{"monitoring/grafana": prev}, first.Records
	o.Now = func() time.Time { return time.Now().Add(time.Hour) }
	again, err := Seal(context.Background(), objects(t, rendered), o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Encrypted != 0 || again.Objects[0].MustString() != first.Objects[0].MustString() {
		t.Fatalf("an unchanged Secret was encrypted again:\n%s\n---\n%s", first.Objects[0].MustString(), again.Objects[0].MustString())
	}
	changed := strings.Replace(rendered, "c2VjcmV0LXZhbHVlLTQy", "bmV3LXZhbHVl", 1)
	next, err := Seal(context.Background(), objects(t, changed), o)
	if err != nil {
		t.Fatal(err)
	}
	if next.Encrypted != 1 || decrypt(t, next.Objects[0], id)["data"].(map[string]any)["admin-password"] != "bmV3LXZhbHVl" {
		t.Fatalf("a changed Secret was not encrypted anew")
	}
	o.Recipients = &v1alpha1.SOPS{Age: []string{id.Recipient().String(), identity(t).Recipient().String()}}
	if moved, err := Seal(context.Background(), objects(t, rendered), o); err != nil || moved.Encrypted != 1 {
		t.Fatalf("a Secret whose recipients changed: %v, %d encrypted", err, moved.Encrypted)
	}
	o.Key = []byte("another sync's key, 32 bytes....")
	o.Recipients = &v1alpha1.SOPS{Age: []string{id.Recipient().String()}}
	if other, err := Seal(context.Background(), objects(t, rendered), o); err != nil || other.Encrypted != 1 {
		t.Fatalf("a digest under another key was taken for this one: %v, %d encrypted", err, other.Encrypted)
	}
}

// Without recipients a Secret is not committed: the error names it, where
// it came from, and the ways out, for the tool that deploys it; omit and
// plaintext do as they say; a Secret the source holds encrypted passes.
func TestASecretIsNeverCommittedReadableUnlessAsked(t *testing.T) {
	origins := func(*yaml.RNode) string { return "grafana/templates/secret.yaml" }
	for tool, want := range map[string]string{
		v1alpha1.DeployerFlux:    "spec.destination.sops",
		v1alpha1.DeployerArgoCD:  "Argo CD cannot decrypt SOPS",
		v1alpha1.DeployerKubectl: "kubectl apply cannot decrypt SOPS",
	} {
		_, err := Seal(context.Background(), objects(t, rendered), Options{Tool: tool, Key: key, Origins: origins})
		if !errors.Is(err, ErrReadable) {
			t.Fatalf("%s: err = %v", tool, err)
		}
		for _, s := range []string{"Secret monitoring/grafana", "grafana/templates/secret.yaml", want, "secrets: omit", "secrets: plaintext"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", tool, err, s)
			}
		}
		if strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("the error holds the value: %v", err)
		}
	}
	omit, err := Seal(context.Background(), objects(t, rendered), Options{Policy: v1alpha1.SecretsOmit})
	if err != nil || len(omit.Objects) != 1 || omit.Objects[0].GetKind() != "ConfigMap" || omit.Records[0].Committed != v1alpha1.SecretOmitted {
		t.Errorf("omit: %v %v", err, omit)
	}
	plain, err := Seal(context.Background(), objects(t, rendered), Options{Policy: v1alpha1.SecretsPlaintext})
	if err != nil || len(plain.Objects) != 2 || !strings.Contains(plain.Objects[0].MustString(), "c2VjcmV0LXZhbHVlLTQy") {
		t.Errorf("plaintext: %v", err)
	}
	id := identity(t)
	enc := testenv.SOPSEncrypt(t, strings.Split(rendered, "---\n")[0], id.Recipient().String(), encryptedRegex)
	asIs, err := Seal(context.Background(), objects(t, enc), Options{})
	if err != nil || asIs.Records[0].Committed != v1alpha1.SecretAsIs || asIs.Objects[0].MustString() != objects(t, enc)[0].MustString() {
		t.Errorf("a Secret encrypted in the source: %v %+v", err, asIs.Records)
	}
	// Encrypting needs the sync key, to know an unchanged Secret later.
	_, err = Seal(context.Background(), objects(t, rendered), Options{Recipients: &v1alpha1.SOPS{Age: []string{id.Recipient().String()}}, KeyMissing: "pass --sync-key"})
	if err == nil || !strings.Contains(err.Error(), "pass --sync-key") {
		t.Errorf("without a key: %v", err)
	}
}

// A recipient that cannot be used fails the encryption, naming the
// setting that names it.
func TestAnUnusableRecipientNamesItsSetting(t *testing.T) {
	tests := []struct {
		sops *v1alpha1.SOPS
		want string
	}{
		{&v1alpha1.SOPS{Age: []string{identity(t).Recipient().String(), "age1notakey"}}, "spec.destination.sops.age[1]"},
		// Vault's transit API, on a port nothing listens on.
		{&v1alpha1.SOPS{HCVaultTransit: []string{"http://127.0.0.1:1/v1/transit/keys/sluice"}}, "spec.destination.sops.hcVaultTransit[0]"},
	}
	for _, tt := range tests {
		_, err := Seal(context.Background(), objects(t, rendered), Options{Recipients: tt.sops, Key: key})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v, want one naming %s", err, tt.want)
		}
	}
}

func TestSOPSVersionFollowsGoMod(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/getsops/sops/v3").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v"); v != sopsModuleVersion {
		t.Errorf("go.mod has SOPS %s, sopsModuleVersion says %s", v, sopsModuleVersion)
	}
}
