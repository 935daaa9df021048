package owner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/ProtonMail/go-crypto/openpgp"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/azkv"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/gcpkms"
	"github.com/getsops/sops/v3/hcvault"
	"github.com/getsops/sops/v3/keyservice"
	"github.com/getsops/sops/v3/kms"
	"github.com/getsops/sops/v3/pgp"
	sopsdotenv "github.com/getsops/sops/v3/stores/dotenv"
	sopsini "github.com/getsops/sops/v3/stores/ini"
	sopsjson "github.com/getsops/sops/v3/stores/json"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// SOPS decryption as kustomize-controller decrypts what it applies,
// through SOPS's own stores and key sources (github.com/getsops/sops/v3):
//
//   - before the build, the files a kustomization's secretGenerator reads
//     (files and envs) and its patches, each in the format of its name
//     (YAML, JSON, dotenv, INI or binary), their MAC checked;
//   - after the build, every object holding a `sops` key, as JSON. Its
//     MAC cannot be checked then (kustomize changed the object: a
//     namespace, labels, a prefix), so, unlike kustomize-controller, the
//     file it came from was checked when the build read it, and an
//     object whose file was not is checked as it stands.
//
// The data key is opened by the keys of the Kustomization's decryption
// Secret, read as kustomize-controller reads them (*.agekey age
// identities, *.asc OpenPGP private keys, sops.vault-token,
// sops.aws-kms, sops.azure-kv, sops.gcp-kms), then by the developer's own,
// as `sops decrypt` finds them on their machine (SOPS_AGE_KEY_FILE, the
// GnuPG agent, the cloud SDKs' credentials, VAULT_TOKEN): a session runs
// on the developer's machine. The developer's Vault token goes only to
// their VAULT_ADDR or an address SOPS_HC_VAULT_ALLOWLIST names, not to
// whatever address a file in someone's repository names.

// maxSOPSFile bounds an encrypted file or object, as kustomize-controller
// bounds it.
const maxSOPSFile = 5 << 20

// sourcesDecrypted reports whether the build read a decrypted source.
func (d *decryptor) sourcesDecrypted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.decryptedSources > 0
}

// decryptor decrypts for one render. It reads the decryption Secret
// when something first needs decrypting.
type decryptor struct {
	f *Flux

	mu       sync.Mutex
	loaded   bool
	loadErr  error
	secret   string // "NAMESPACE/NAME" of the decryption Secret; "" without one
	services []keyservice.KeyServiceClient
	held     []string // what the Secret holds, for messages: "age identities (age.agekey)"
	// checked are the MACs of the files whose integrity was checked as
	// the build read them; refused, those whose check failed, and why.
	checked map[string]bool
	refused map[string]error
	// sources are the files (tree paths) that kustomizations read name
	// as secretGenerator sources or patches, with the format
	// kustomize-controller decrypts each in.
	sources map[string]formats.Format
	// decryptedSources counts the sources decrypted: what a generator
	// made of them is as secret as they were.
	decryptedSources int
}

func newDecryptor(f *Flux) *decryptor {
	return &decryptor{f: f, checked: map[string]bool{}, refused: map[string]error{}, sources: map[string]formats.Format{}}
}

// keys reads the Kustomization's decryption Secret, as the client's
// identity, once.
func (d *decryptor) keys(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loaded {
		return d.loadErr
	}
	d.loaded = true
	f := d.f
	keys := &secretKeys{}
	if ref := f.spec.Decryption.SecretRef; ref != nil && ref.Name != "" {
		d.secret = f.Ref.Namespace + "/" + ref.Name
		var s corev1.Secret
		if err := f.kube.Get(ctx, client.ObjectKey{Namespace: f.Ref.Namespace, Name: ref.Name}, &s); err != nil {
			d.loadErr = fmt.Errorf("%s: spec.decryption.secretRef: reading Secret %s: %w", f.Name(), d.secret, err)
			return d.loadErr
		}
		held, err := keys.read(s.Data)
		if err != nil {
			d.loadErr = fmt.Errorf("%s: Secret %s %w", f.Name(), d.secret, err)
			return d.loadErr
		}
		d.held = held
	}
	d.services = []keyservice.KeyServiceClient{
		keyservice.NewCustomLocalClient(keys),
		keyservice.NewCustomLocalClient(ownKeys{}),
	}
	return nil
}

// secretKeys opens data keys with a decryption Secret's keys only: a key
// it holds no credentials for is not tried with anyone else's.
type secretKeys struct {
	age   sopsage.ParsedIdentities
	pgp   openpgp.EntityList
	vault string
	aws   *kms.CredentialsProvider
	azure *azkv.TokenCredential
	gcp   gcpkms.CredentialJSON
}

// read takes the keys of a decryption Secret's data, by kustomize-
// controller's names, and says what it holds.
func (k *secretKeys) read(data map[string][]byte) ([]string, error) {
	var held []string
	for name, value := range data {
		switch {
		case filepath.Ext(name) == ".agekey":
			if err := k.age.Import(string(value)); err != nil {
				return nil, fmt.Errorf("key %s: not age identities: %w", name, err)
			}
			held = append(held, "age identities ("+name+")")
		case filepath.Ext(name) == ".asc":
			keys, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(value))
			if err != nil {
				return nil, fmt.Errorf("key %s: not an armored OpenPGP key: %w", name, err)
			}
			k.pgp = append(k.pgp, keys...)
			held = append(held, "OpenPGP keys ("+name+")")
		case name == "sops.vault-token":
			k.vault = strings.TrimSpace(string(value))
			held = append(held, "a Vault token ("+name+")")
		case name == "sops.aws-kms":
			var c struct {
				ID      string `json:"aws_access_key_id"`
				Secret  string `json:"aws_secret_access_key"`
				Session string `json:"aws_session_token"`
			}
			if err := sigsyaml.Unmarshal(value, &c); err != nil || c.ID == "" || c.Secret == "" {
				return nil, fmt.Errorf("key %s: want YAML with aws_access_key_id and aws_secret_access_key (and aws_session_token): %v", name, err)
			}
			k.aws = kms.NewCredentialsProvider(awscreds.NewStaticCredentialsProvider(c.ID, c.Secret, c.Session))
			held = append(held, "AWS credentials ("+name+")")
		case name == "sops.azure-kv":
			var c struct {
				TenantID     string `json:"tenantId"`
				ClientID     string `json:"clientId"`
				ClientSecret string `json:"clientSecret"`
			}
			if err := sigsyaml.Unmarshal(value, &c); err != nil || c.TenantID == "" || c.ClientID == "" || c.ClientSecret == "" {
				return nil, fmt.Errorf("key %s: want tenantId, clientId and clientSecret: %v", name, err)
			}
			cred, err := azidentity.NewClientSecretCredential(c.TenantID, c.ClientID, c.ClientSecret, nil)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", name, err)
			}
			k.azure = azkv.NewTokenCredential(cred)
			held = append(held, "Azure credentials ("+name+")")
		case name == "sops.gcp-kms":
			if !json.Valid(bytes.TrimSpace(value)) {
				return nil, fmt.Errorf("key %s: not a JSON service account key", name)
			}
			k.gcp = gcpkms.CredentialJSON(bytes.TrimSpace(value))
			held = append(held, "GCP credentials ("+name+")")
		}
	}
	return held, nil
}

func (k *secretKeys) Encrypt(context.Context, *keyservice.EncryptRequest) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("a session does not encrypt")
}

// Decrypt opens a data key with the Secret's credentials for its key's
// type, if the Secret holds any.
func (k *secretKeys) Decrypt(ctx context.Context, req *keyservice.DecryptRequest) (*keyservice.DecryptResponse, error) {
	var plain []byte
	var err error
	switch key := req.Key.KeyType.(type) {
	case *keyservice.Key_AgeKey:
		if len(k.age) == 0 {
			return nil, errNoCredentials
		}
		m := &sopsage.MasterKey{Recipient: key.AgeKey.Recipient, EncryptedKey: string(req.Ciphertext)}
		k.age.ApplyToMasterKey(m)
		plain, err = m.Decrypt()
	case *keyservice.Key_PgpKey:
		if len(k.pgp) == 0 {
			return nil, errNoCredentials
		}
		plain, err = k.decryptPGP(ctx, key.PgpKey.Fingerprint, req.Ciphertext)
	case *keyservice.Key_VaultKey:
		if k.vault == "" {
			return nil, errNoCredentials
		}
		m := &hcvault.MasterKey{VaultAddress: key.VaultKey.VaultAddress, EnginePath: key.VaultKey.EnginePath, KeyName: key.VaultKey.KeyName, EncryptedKey: string(req.Ciphertext)}
		hcvault.Token(k.vault).ApplyToMasterKey(m)
		plain, err = m.DecryptContext(ctx)
	case *keyservice.Key_KmsKey:
		if k.aws == nil {
			return nil, errNoCredentials
		}
		m := kmsMasterKey(key.KmsKey)
		m.EncryptedKey = string(req.Ciphertext)
		k.aws.ApplyToMasterKey(m)
		plain, err = m.DecryptContext(ctx)
	case *keyservice.Key_AzureKeyvaultKey:
		if k.azure == nil {
			return nil, errNoCredentials
		}
		m := &azkv.MasterKey{VaultURL: key.AzureKeyvaultKey.VaultUrl, Name: key.AzureKeyvaultKey.Name, Version: key.AzureKeyvaultKey.Version, EncryptedKey: string(req.Ciphertext)}
		k.azure.ApplyToMasterKey(m)
		plain, err = m.DecryptContext(ctx)
	case *keyservice.Key_GcpKmsKey:
		if k.gcp == nil {
			return nil, errNoCredentials
		}
		m := &gcpkms.MasterKey{ResourceID: key.GcpKmsKey.ResourceId, EncryptedKey: string(req.Ciphertext)}
		k.gcp.ApplyToMasterKey(m)
		plain, err = m.DecryptContext(ctx)
	default:
		return nil, errNoCredentials
	}
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: plain}, nil
}

// errNoCredentials: the Secret holds nothing for this key's type.
var errNoCredentials = errors.New("the decryption Secret holds no credentials for it")

// decryptPGP opens a data key with the Secret's OpenPGP keys, through
// SOPS's OpenPGP key source: it reads a secret keyring file, written for
// this one call into a private GnuPG home (where the GnuPG binary, tried
// next, finds no other key) and removed after.
func (k *secretKeys) decryptPGP(ctx context.Context, fingerprint string, ciphertext []byte) ([]byte, error) {
	home, err := pgp.NewGnuPGHome()
	if err != nil {
		return nil, err
	}
	defer home.Cleanup()
	var ring bytes.Buffer
	for _, e := range k.pgp {
		if e.PrivateKey == nil {
			continue
		}
		if err := e.SerializePrivate(&ring, nil); err != nil {
			return nil, fmt.Errorf("OpenPGP key %X: %w", e.PrimaryKey.Fingerprint, err)
		}
	}
	secring := filepath.Join(home.String(), "secring.gpg")
	if err := os.WriteFile(secring, ring.Bytes(), 0o600); err != nil {
		return nil, err
	}
	m := pgp.NewMasterKeyFromFingerprint(fingerprint)
	m.EncryptedKey = string(ciphertext)
	home.ApplyToMasterKey(m)
	pgp.SecRing(secring).ApplyToMasterKey(m)
	return m.DecryptContext(ctx)
}

func kmsMasterKey(k *keyservice.KmsKey) *kms.MasterKey {
	c := map[string]*string{}
	for name, v := range k.Context {
		c[name] = &v
	}
	return &kms.MasterKey{Arn: k.Arn, Role: k.Role, EncryptionContext: c, AwsProfile: k.AwsProfile}
}

// ownKeys opens data keys as `sops decrypt` would on the developer's
// machine, except that their Vault token is sent to no address they did
// not name.
type ownKeys struct{}

func (ownKeys) Encrypt(context.Context, *keyservice.EncryptRequest) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("a session does not encrypt")
}

func (ownKeys) Decrypt(ctx context.Context, req *keyservice.DecryptRequest) (*keyservice.DecryptResponse, error) {
	if v, ok := req.Key.KeyType.(*keyservice.Key_VaultKey); ok {
		if err := ownVaultAllows(v.VaultKey.VaultAddress); err != nil {
			return nil, err
		}
	}
	return keyservice.Server{}.Decrypt(ctx, req)
}

// ownVaultAllows refuses to send the developer's Vault token to an
// address that neither VAULT_ADDR nor SOPS_HC_VAULT_ALLOWLIST names.
func ownVaultAllows(address string) error {
	norm := func(s string) string { return strings.TrimSuffix(strings.TrimSpace(s), "/") + "/" }
	if a := os.Getenv("VAULT_ADDR"); a != "" && norm(a) == norm(address) {
		return nil
	}
	for _, a := range strings.Split(os.Getenv("SOPS_HC_VAULT_ALLOWLIST"), ",") {
		if a = strings.TrimSpace(a); a != "" && a != "all" && strings.HasPrefix(norm(address), norm(a)) {
			return nil
		}
	}
	return fmt.Errorf("your Vault token is sent only to VAULT_ADDR or an address SOPS_HC_VAULT_ALLOWLIST names, not to %s", address)
}

// storeFor is SOPS's store of a format, configured as the sops CLI's
// defaults (JSON indented with tabs), as kustomize-controller's are.
func storeFor(f formats.Format) sops.Store {
	c := config.NewStoresConfig()
	switch f {
	case formats.Yaml:
		return sopsyaml.NewStore(&c.YAML)
	case formats.Json:
		return sopsjson.NewStore(&c.JSON)
	case formats.Dotenv:
		return sopsdotenv.NewStore(&c.Dotenv)
	case formats.Ini:
		return sopsini.NewStore(&c.INI)
	}
	return sopsjson.NewBinaryStore(&c.JSONBinary)
}

var formatNames = map[formats.Format]string{formats.Binary: "binary", formats.Dotenv: "dotenv", formats.Ini: "INI", formats.Json: "JSON", formats.Yaml: "YAML"}

// markers say that a text is SOPS-encrypted, per format, as
// kustomize-controller tells.
var markers = map[formats.Format][]byte{
	formats.Binary: []byte(`"mac": "ENC[`),
	formats.Dotenv: []byte("sops_mac=ENC["),
	formats.Ini:    []byte("[sops]"),
	formats.Json:   []byte(`"mac": "ENC[`),
	formats.Yaml:   []byte("mac: ENC["),
}

// decrypt decrypts an encrypted text of format in into format out; with
// checkMAC, the file's MAC must match what it holds.
func (d *decryptor) decrypt(ctx context.Context, data []byte, in, out formats.Format, checkMAC bool) (_ []byte, err error) {
	defer func() {
		// SOPS's stores have panicked on crafted input.
		if r := recover(); r != nil {
			err = fmt.Errorf("SOPS could not read it as %s: %v", formatNames[in], r)
		}
	}()
	if len(data) > maxSOPSFile {
		return nil, fmt.Errorf("it is %d bytes, more than the %d a SOPS file may be", len(data), maxSOPSFile)
	}
	if err := d.keys(ctx); err != nil {
		return nil, err
	}
	tree, err := storeFor(in).LoadEncryptedFile(data)
	if err != nil {
		return nil, fmt.Errorf("not a SOPS-encrypted %s file: %w", formatNames[in], err)
	}
	key, err := tree.Metadata.GetDataKeyWithKeyServices(d.services, sops.DefaultDecryptionOrder)
	if err != nil {
		return nil, d.noKey(tree.Metadata, err)
	}
	cipher := sopsaes.NewCipher()
	mac, err := tree.Decrypt(key, cipher)
	if err != nil {
		return nil, fmt.Errorf("it does not decrypt with its data key: %w", err)
	}
	if checkMAC {
		stored, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, key, tree.Metadata.LastModified.Format(time.RFC3339))
		if err != nil {
			return nil, fmt.Errorf("its MAC does not decrypt: %w", err)
		}
		if stored != mac {
			return nil, errMAC
		}
	}
	return storeFor(out).EmitPlainFile(tree.Branches)
}

var errMAC = errors.New("its MAC does not match what it holds: it was changed since it was encrypted (edit it with `sops edit`, or encrypt it again)")

// noKey says, on one line, which keys could open a file, which the
// decryptor held, and what each try answered.
func (d *decryptor) noKey(m sops.Metadata, err error) error {
	holder := "no decryption Secret (spec.decryption.secretRef) and none of your own keys"
	if d.secret != "" {
		holder = "neither Secret " + d.secret
		if len(d.held) > 0 {
			holder += " (" + strings.Join(d.held, ", ") + ")"
		}
		holder += " nor your own keys"
	}
	var groups []string
	for _, g := range m.KeyGroups {
		var keys []string
		for _, k := range g {
			keys = append(keys, k.TypeToIdentifier()+" "+k.ToString())
		}
		groups = append(groups, strings.Join(keys, " or "))
	}
	needs := strings.Join(groups, "; and ")
	if len(m.KeyGroups) > 1 {
		needs = fmt.Sprintf("%d of its %d key groups: %s", max(m.ShamirThreshold, 1), len(m.KeyGroups), needs)
	}
	detail := err.Error()
	var ue sops.UserError
	if errors.As(err, &ue) {
		detail = ue.UserError()
	}
	return fmt.Errorf("%s open its data key: it needs %s (%s)", holder, needs, oneLine(detail, 2000))
}

// oneLine joins a multi-line message (SOPS's, coloured for a terminal)
// into one line of at most n bytes.
func oneLine(s string, n int) string {
	s = ansi.ReplaceAllString(s, "")
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	s = strings.Join(parts, " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// read is given every file the build reads. A kustomization's
// secretGenerator sources and patches are noted, and decrypted when
// read, their MAC checked; any other SOPS-encrypted YAML or JSON file
// has its MAC checked (its objects are decrypted after the build, where
// a failed check is said, unless decryption is disabled for them).
func (d *decryptor) read(ctx context.Context, name string, data []byte) ([]byte, error) {
	if isKustomization(name) {
		d.note(name, data)
		return data, nil
	}
	d.mu.Lock()
	format, source := d.sources[name]
	d.mu.Unlock()
	if source {
		if !bytes.Contains(data, markers[format]) {
			return data, nil
		}
		out, err := d.decrypt(ctx, data, format, format, true)
		if err != nil {
			return nil, fmt.Errorf("%s: decrypting %s: %w", d.f.Name(), name, err)
		}
		d.mu.Lock()
		d.decryptedSources++
		d.mu.Unlock()
		return out, nil
	}
	for _, f := range []formats.Format{formats.Yaml, formats.Json} {
		if formats.FormatForPath(name) != f || !bytes.Contains(data, markers[f]) {
			continue
		}
		macs := sopsMACs(data)
		if len(macs) == 0 {
			continue
		}
		_, err := d.decrypt(ctx, data, f, f, true)
		d.mu.Lock()
		for _, m := range macs {
			if err == nil {
				d.checked[m] = true
			} else {
				d.refused[m] = fmt.Errorf("%s: %w", name, err)
			}
		}
		d.mu.Unlock()
	}
	return data, nil
}

// sopsMACs are the MACs of the SOPS metadata at the top of the objects
// of a YAML or JSON text.
func sopsMACs(data []byte) []string {
	nodes, err := kio.FromBytes(data)
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range nodes {
		if m := n.Field("sops"); m != nil {
			if mac := m.Value.Field("mac"); !mac.IsNilOrEmpty() {
				out = append(out, yaml.GetValue(mac.Value))
			}
		}
	}
	return out
}

func isKustomization(name string) bool {
	switch path.Base(name) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// note records the files a kustomization names as secretGenerator
// sources and patches, as kustomize-controller decrypts them: a file
// source in the format of its key's name, an env file as dotenv unless
// its name says another, a patch as its name says.
func (d *decryptor) note(name string, data []byte) {
	var k struct {
		SecretGenerator []struct {
			Files []string `json:"files"`
			Envs  []string `json:"envs"`
			Env   string   `json:"env"`
		} `json:"secretGenerator"`
		Patches []struct {
			Path string `json:"path"`
		} `json:"patches"`
		PatchesStrategicMerge []string `json:"patchesStrategicMerge"`
	}
	if sigsyaml.Unmarshal(data, &k) != nil {
		return // kustomize says what is wrong with it
	}
	dir := path.Dir(name)
	d.mu.Lock()
	defer d.mu.Unlock()
	add := func(p string, f formats.Format) {
		if p == "" || strings.Contains(p, "://") || path.IsAbs(p) {
			return
		}
		d.sources[path.Join(dir, p)] = f
	}
	for _, g := range k.SecretGenerator {
		for _, src := range g.Files {
			key, file, ok := strings.Cut(src, "=")
			if !ok {
				file = key
			}
			add(file, formats.FormatForPath(key))
		}
		for _, env := range append(g.Envs, g.Env) {
			f := formats.FormatForPath(env)
			if f == formats.Binary {
				f = formats.Dotenv
			}
			add(env, f)
		}
	}
	for _, p := range k.Patches {
		add(p.Path, formats.FormatForPath(p.Path))
	}
	for _, p := range k.PatchesStrategicMerge {
		if !strings.Contains(p, "\n") {
			add(p, formats.FormatForPath(p))
		}
	}
}

// object decrypts o if it holds SOPS metadata, into a new node; it
// reports whether it did. The MAC of the file it came from was checked
// as the build read it; an object from elsewhere has its own checked.
func (d *decryptor) object(ctx context.Context, o *yaml.RNode) (*yaml.RNode, bool, error) {
	meta := o.Field("sops")
	if meta == nil || meta.Value.IsNilOrEmpty() {
		return o, false, nil
	}
	mac := meta.Value.Field("mac")
	if mac.IsNilOrEmpty() {
		return o, false, nil
	}
	d.mu.Lock()
	checked, refused := d.checked[yaml.GetValue(mac.Value)], d.refused[yaml.GetValue(mac.Value)]
	d.mu.Unlock()
	if refused != nil {
		return nil, false, refused
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return nil, false, err
	}
	out, err := d.decrypt(ctx, data, formats.Json, formats.Json, !checked)
	if err != nil {
		return nil, false, err
	}
	n, err := yaml.ConvertJSONToYamlNode(string(out))
	if err != nil {
		return nil, false, err
	}
	return n, true, nil
}
