package owner

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"filippo.io/age"
	"github.com/ProtonMail/go-crypto/openpgp"
	pgparmor "github.com/ProtonMail/go-crypto/openpgp/armor"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// sopsKeys are the keys of one test: age identities and an OpenPGP key.
type sopsKeys struct {
	age   []*age.X25519Identity
	pgp   *openpgp.Entity
	fpr   string // the OpenPGP key's fingerprint, as sops writes it
	armor []byte // its armored private key, as a *.asc entry holds it
}

func newSOPSKeys(t *testing.T, ages int) sopsKeys {
	t.Helper()
	var k sopsKeys
	for range ages {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		k.age = append(k.age, id)
	}
	e, err := openpgp.NewEntity("fleet", "", "fleet@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	k.pgp, k.fpr = e, strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint[:]))
	var b bytes.Buffer
	w, err := pgparmor.Encode(&b, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	k.armor = b.Bytes()
	return k
}

// encrypt encrypts plain, as a file named name, with the real sops CLI
// and a .sops.yaml of rules (its keys: ${AGE0}, ${AGE1}, ${PGP}).
func (k sopsKeys) encrypt(t *testing.T, name, plain, rules string) string {
	t.Helper()
	for i, id := range k.age {
		rules = strings.ReplaceAll(rules, fmt.Sprintf("${AGE%d}", i), id.Recipient().String())
	}
	rules = strings.ReplaceAll(rules, "${PGP}", k.fpr)
	cfg := filepath.Join(t.TempDir(), ".sops.yaml")
	if err := os.WriteFile(cfg, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	if strings.Contains(rules, k.fpr) {
		// The public key where sops's GnuPG finds it.
		env = append(env, "GNUPGHOME="+testenv.GnuPGHome(t, k.pgp))
	}
	return testenv.SOPSEncryptFile(t, name, plain, env, "--config", cfg)
}

// secretData is a decryption Secret's data holding the keys, by
// kustomize-controller's names.
func (k sopsKeys) secretData(ages ...int) map[string][]byte {
	d := map[string][]byte{"fleet.asc": k.armor}
	for _, i := range ages {
		d[fmt.Sprintf("id%d.agekey", i)] = []byte(k.age[i].String())
	}
	return d
}

const (
	secretRules = "creation_rules: [{encrypted_regex: '^(data|stringData)$', age: '${AGE0}'}]\n"
	pgpRules    = "creation_rules: [{encrypted_regex: '^(data|stringData)$', pgp: '${PGP}'}]\n"
	// Shamir secret sharing: two key groups, both needed.
	groupRules = `creation_rules:
- encrypted_regex: '^(data|stringData)$'
  shamir_threshold: 2
  key_groups:
  - age: ['${AGE0}']
  - age: ['${AGE1}']
`
	fileRules = "creation_rules: [{age: '${AGE0}'}]\n"
	dataRules = "creation_rules: [{encrypted_regex: '^data$', age: '${AGE0}'}]\n"
)

// sopsCase is a folder of SOPS-encrypted files, each encrypted by the
// real sops CLI, that the real kustomize-controller decrypts with the
// keys of Secret sops-keys: Secrets for an age key, an OpenPGP key and
// two key groups (Shamir); a secretGenerator's env file (dotenv), JSON
// file and binary file; an encrypted patch.
func sopsCase(t *testing.T) (fluxCase, map[string][]byte) {
	k := newSOPSKeys(t, 2)
	secret := func(name, value string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s}\ntype: Opaque\nstringData: {password: %s}\ndata: {token: dG9rZW4=}\n", name, value)
	}
	return fluxCase{
		name: "sops",
		files: map[string]string{
			"sops/kustomization.yaml": `resources: [db.yaml, pgp.yaml, groups.yaml, settings.yaml]
secretGenerator:
- name: env
  envs: [app.env]
- name: files
  files: [config.json, key.bin, renamed.yaml=other.yaml]
patches:
- path: patch.yaml
`,
			"sops/db.yaml":       k.encrypt(t, "db.yaml", secret("db", "s3cret"), secretRules),
			"sops/pgp.yaml":      k.encrypt(t, "pgp.yaml", secret("pgp", "pgp-s3cret"), pgpRules),
			"sops/groups.yaml":   k.encrypt(t, "groups.yaml", secret("groups", "shared-s3cret"), groupRules),
			"sops/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {plain: 'yes'}\n",
			"sops/app.env":       k.encrypt(t, "app.env", "USER=admin\nPASSWORD=env-s3cret\n", fileRules),
			"sops/config.json":   k.encrypt(t, "config.json", `{"api": {"key": "json-s3cret"}, "port": 8080}`, fileRules),
			"sops/key.bin":       k.encrypt(t, "key.bin", "binary\x00s3cret\n", fileRules),
			"sops/other.yaml":    k.encrypt(t, "other.yaml", "nested: {secret: yaml-s3cret}\nlist: [1, two]\n", fileRules),
			"sops/patch.yaml":    k.encrypt(t, "patch.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {token: patch-s3cret}\n", dataRules),
		},
		spec:   "  decryption: {provider: sops, secretRef: {name: sops-keys}}\n",
		report: "targetNamespace NS, 5 Secrets decrypted",
	}, k.secretData(0, 1)
}

// sopsFlux is a Kustomization of the test control plane, in a namespace
// of its own, decrypting with a Secret holding data (none if nil).
func sopsFlux(t *testing.T, data map[string][]byte) *Flux {
	t.Helper()
	ctx := context.Background()
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Namespace("sops")
	if err := c.Kube().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	decryption := "{provider: sops}"
	if data != nil {
		if err := c.Kube().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-keys", Namespace: ns}, Data: data}); err != nil {
			t.Fatal(err)
		}
		decryption = "{provider: sops, secretRef: {name: sops-keys}}"
	}
	u := &unstructured.Unstructured{}
	doc := fmt.Sprintf("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: %s}\nspec:\n  targetNamespace: shop\n  decryption: %s\n", ns, decryption)
	if err := sigsyaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	f, err := fluxOf(u, c.Kube())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// noOwnKeys leaves the test's process none of a developer's keys: no
// age key file, no GnuPG keys, no Vault token.
func noOwnKeys(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GNUPGHOME", filepath.Join(home, ".gnupg"))
	for _, v := range []string{"SOPS_AGE_KEY_FILE", "SOPS_AGE_KEY", "SOPS_AGE_KEY_CMD", "SOPS_AGE_SSH_PRIVATE_KEY_FILE", "VAULT_TOKEN", "VAULT_ADDR", "SOPS_HC_VAULT_ALLOWLIST"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
}

// Files changed after they were encrypted are refused: their MAC no
// longer matches what they hold, whether the change is in a Secret's
// plain fields (its name, its type), a value moved to another key, or a
// generator's file; the message names the file. The same files
// unchanged decrypt.
func TestSOPSFilesChangedSinceEncryptedAreRefused(t *testing.T) {
	noOwnKeys(t)
	k := newSOPSKeys(t, 1)
	f := sopsFlux(t, k.secretData(0))
	db := k.encrypt(t, "db.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\ntype: Opaque\nstringData: {password: s3cret}\n", secretRules)
	env := k.encrypt(t, "app.env", "USER=admin\nPASSWORD=s3cret\n", fileRules)
	kustomization := "resources: [db.yaml]\nsecretGenerator: [{name: env, envs: [app.env]}]\n"
	objs, err := renderAs(t, f, tree(t, map[string]string{"apps/kustomization.yaml": kustomization, "apps/db.yaml": db, "apps/app.env": env}), "apps")
	if err != nil {
		t.Fatal(err)
	}
	if got := secretValue(t, objs, "db", "password"); got != "s3cret" {
		t.Errorf("db's password = %s", got)
	}
	for _, tc := range []struct{ name, file, from, to string }{
		{"a plain field changed", "apps/db.yaml", "type: Opaque", "type: kubernetes.io/basic-auth"},
		{"the object renamed", "apps/db.yaml", "name: db", "name: admin"},
		{"a value moved to another key", "apps/db.yaml", "password:", "passwd:"},
		{"a generator's file lost a line", "apps/app.env", "PASSWORD=", "#PASSWORD="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"apps/kustomization.yaml": kustomization, "apps/db.yaml": db, "apps/app.env": env}
			if !strings.Contains(files[tc.file], tc.from) {
				t.Fatalf("%s holds no %q", tc.file, tc.from)
			}
			files[tc.file] = strings.Replace(files[tc.file], tc.from, tc.to, 1)
			_, err := renderAs(t, f, tree(t, files), "apps")
			if err == nil || !strings.Contains(err.Error(), tc.file) {
				t.Fatalf("err = %v, want a refusal naming %s", err, tc.file)
			}
			if tc.name != "a value moved to another key" && !strings.Contains(err.Error(), "MAC") {
				t.Errorf("err = %v, want it to say the MAC does not match", err)
			}
			t.Log(err)
		})
	}
}

// Without the key: the message names the Secret, what it holds and the
// key the file needs. With the developer's own age key (as `sops
// decrypt` finds it), a Kustomization without a decryption Secret
// decrypts in a session.
func TestSOPSKeysTheSecretOrTheDeveloperHolds(t *testing.T) {
	noOwnKeys(t)
	k := newSOPSKeys(t, 2)
	files := map[string]string{"apps/db.yaml": k.encrypt(t, "db.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: s3cret}\n", secretRules)}
	root := tree(t, files)

	f := sopsFlux(t, map[string][]byte{"other.agekey": []byte(k.age[1].String())})
	_, err := renderAs(t, f, root, "apps")
	if err == nil || !strings.Contains(err.Error(), f.Ref.Namespace+"/sops-keys") || !strings.Contains(err.Error(), k.age[0].Recipient().String()) || !strings.Contains(err.Error(), "other.agekey") {
		t.Errorf("err = %v, want one naming the Secret, what it holds and the recipient", err)
	}

	f = sopsFlux(t, nil)
	if _, err := renderAs(t, f, root, "apps"); err == nil || !strings.Contains(err.Error(), "no decryption Secret") {
		t.Errorf("err = %v, want one saying there is no decryption Secret and no key of the developer's", err)
	}
	keyFile := filepath.Join(t.TempDir(), "keys.txt")
	if err := os.WriteFile(keyFile, []byte(k.age[0].String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOPS_AGE_KEY_FILE", keyFile)
	objs, err := renderAs(t, f, root, "apps")
	if err != nil {
		t.Fatal(err)
	}
	if got := secretValue(t, objs, "db", "password"); got != "s3cret" {
		t.Errorf("with the developer's key, db's password = %s", got)
	}
	if got := f.Last().Decrypted; len(got) != 1 || got[0] != "shop/db" {
		t.Errorf("decrypted %v", got)
	}
}

// The developer's own Vault token goes to their VAULT_ADDR only: a file
// from someone's repository naming another Vault gets nothing, and no
// request reaches it.
func TestSOPSTheDevelopersVaultTokenGoesNowhereElse(t *testing.T) {
	noOwnKeys(t)
	var reached atomic.Int32
	var token atomic.Value
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		token.Store(r.Header.Get("X-Vault-Token"))
		http.Error(w, "no such key", http.StatusNotFound)
	}))
	defer vault.Close()
	k := newSOPSKeys(t, 1)
	enc := k.encrypt(t, "db.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: s3cret}\n", secretRules)
	// The file names a Vault transit key besides its age recipient (what
	// sops writes for `--hc-vault-transit`), which no key here opens.
	enc = strings.Replace(enc, "sops:\n", fmt.Sprintf("sops:\n    hc_vault:\n        - vault_address: %s\n          engine_path: transit\n          key_name: fleet\n          created_at: \"2026-01-01T00:00:00Z\"\n          enc: vault:v1:AAAA\n", vault.URL), 1)
	root := tree(t, map[string]string{"apps/db.yaml": enc})
	f := sopsFlux(t, nil)
	t.Setenv("VAULT_TOKEN", "developer-token")
	t.Setenv("VAULT_ADDR", "https://vault.mine.example")
	_, err := renderAs(t, f, root, "apps")
	if err == nil || !strings.Contains(err.Error(), "not to "+vault.URL) || reached.Load() != 0 {
		t.Fatalf("err = %v, %d requests reached the file's Vault; want a refusal and none", err, reached.Load())
	}
	// Named by the developer, it is asked, with their token.
	t.Setenv("VAULT_ADDR", vault.URL)
	if _, err := renderAs(t, f, root, "apps"); err == nil || reached.Load() == 0 || token.Load() != "developer-token" {
		t.Fatalf("err = %v, %d requests, token %v: want the developer's Vault asked with their token", err, reached.Load(), token.Load())
	}
}

// A file encrypted for an AWS KMS key (by the real sops CLI, against
// Local KMS, a server of KMS's API, behind a proxy that checks each
// request's SigV4 signature as AWS does) decrypts with the AWS
// credentials of the decryption Secret (sops.aws-kms, as
// kustomize-controller reads it), and only with them: another secret
// key, no credentials, and none of the developer's do not.
func TestSOPSFilesEncryptedForAnAWSKMSKey(t *testing.T) {
	noOwnKeys(t)
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	kms := testenv.StartLocalKMS(t)
	arn := kms.CreateKey(t)
	enc := testenv.SOPSEncryptFile(t, "db.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: kms-s3cret}\n",
		kms.Env(), "--kms", arn, "--encrypted-regex", "^(data|stringData)$")
	if !strings.Contains(enc, arn) {
		t.Fatalf("not encrypted for %s:\n%s", arn, enc)
	}
	// Where Sluice's AWS SDK finds the endpoint; the credentials are the
	// Secret's.
	t.Setenv("AWS_ENDPOINT_URL_KMS", kms.Endpoint)
	root := tree(t, map[string]string{"apps/db.yaml": enc})

	// The server takes only the team's key, its requests signed with the
	// team's secret (Local KMS takes anything: a proxy checks SigV4).
	refused := kms.Refused.Load()
	f := sopsFlux(t, map[string][]byte{"sops.aws-kms": []byte("aws_access_key_id: team\naws_secret_access_key: wrong-secret\n")})
	if _, err := renderAs(t, f, root, "apps"); err == nil || !strings.Contains(err.Error(), arn) || kms.Refused.Load() == refused {
		t.Errorf("the Secret's key with another secret: %v (%d refused), want KMS to refuse the signature", err, kms.Refused.Load()-refused)
	}
	f = sopsFlux(t, map[string][]byte{"sops.aws-kms": []byte("aws_access_key_id: " + kms.AccessKeyID + "\naws_secret_access_key: " + kms.SecretAccessKey + "\n")})
	objs, err := renderAs(t, f, root, "apps")
	if err != nil {
		t.Fatal(err)
	}
	if got := secretValue(t, objs, "db", "password"); got != "kms-s3cret" {
		t.Errorf("db's password = %s", got)
	}
	f = sopsFlux(t, map[string][]byte{"other.agekey": []byte(newSOPSKeys(t, 1).age[0].String())})
	if _, err := renderAs(t, f, root, "apps"); err == nil || !strings.Contains(err.Error(), arn) {
		t.Errorf("without AWS credentials: %v, want a refusal naming the key", err)
	}
}

// A file encrypted with a Vault transit key (by the real sops CLI,
// against HashiCorp Vault's dev server) decrypts with the Vault token of
// the decryption Secret (sops.vault-token, as kustomize-controller reads
// it), sent to the Vault the file names; Vault itself refuses a token
// that may only encrypt, and one it never issued.
func TestSOPSFilesEncryptedWithAVaultTransitKey(t *testing.T) {
	noOwnKeys(t)
	vault := testenv.StartVault(t)
	key := vault.TransitKey(t, "fleet")
	enc := testenv.SOPSEncryptFile(t, "db.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: vault-s3cret}\n",
		[]string{"VAULT_ADDR=" + vault.Addr, "VAULT_TOKEN=" + vault.RootToken}, "--hc-vault-transit", key, "--encrypted-regex", "^(data|stringData)$")
	if !strings.Contains(enc, "hc_vault:") || !strings.Contains(enc, vault.Addr) {
		t.Fatalf("not encrypted for %s:\n%s", key, enc)
	}
	root := tree(t, map[string]string{"apps/db.yaml": enc})
	decrypt := vault.Token(t, "decrypt", `path "sops/decrypt/fleet" { capabilities = ["update"] }`)
	encrypt := vault.Token(t, "encrypt", `path "sops/encrypt/fleet" { capabilities = ["update"] }`)

	for name, token := range map[string]string{"a token that may only encrypt": encrypt, "a token Vault never issued": "hvs.not-a-token"} {
		f := sopsFlux(t, map[string][]byte{"sops.vault-token": []byte(token)})
		if _, err := renderAs(t, f, root, "apps"); err == nil || !strings.Contains(err.Error(), "fleet") || strings.Contains(err.Error(), token) {
			t.Errorf("%s: %v, want Vault's refusal naming the key, not the token", name, err)
		}
	}
	f := sopsFlux(t, map[string][]byte{"sops.vault-token": []byte(decrypt + "\n")})
	objs, err := renderAs(t, f, root, "apps")
	if err != nil {
		t.Fatal(err)
	}
	if got := secretValue(t, objs, "db", "password"); got != "vault-s3cret" {
		t.Errorf("db's password = %s", got)
	}
}

// secretValue is a value of a rendered Secret's data, decoded (a
// render moves stringData into data, as kustomize-controller applies
// it).
func secretValue(t *testing.T, objs []*yaml.RNode, name, key string) string {
	t.Helper()
	v := field(t, objs, "Secret", name, "data", key)
	b, err := base64.StdEncoding.DecodeString(strings.Trim(v, `"'`))
	if err != nil {
		return v
	}
	return string(b)
}
