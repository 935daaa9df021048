package owner

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
	"github.com/ProtonMail/go-crypto/openpgp"
	pgparmor "github.com/ProtonMail/go-crypto/openpgp/armor"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// SOPS decryption, as kustomize-controller decrypts what it applies: an
// object holding a `sops` key with a MAC is decrypted value by value with
// the data key that one of the decryption Secret's keys opens (age
// identities in its *.agekey entries, OpenPGP private keys in its *.asc
// entries). The file format is SOPS's (github.com/getsops/sops/v3); it
// is read here rather than through that module, whose key service links
// every cloud's KMS client into the binary (45 MB, and 18 ms more start
// for every process, render workers included); the tests encrypt with
// the module itself. Like kustomize-controller, the MAC is not checked:
// kustomize's transformations change the object it covers.

// decryptor holds the keys of a Kustomization's decryption Secret.
type decryptor struct {
	secret string // "NAMESPACE/NAME", for messages
	age    []age.Identity
	pgp    openpgp.EntityList
}

// decryptor reads the Kustomization's decryption Secret, as the client's
// identity.
func (f *Flux) decryptor(ctx context.Context) (*decryptor, error) {
	d := &decryptor{}
	ref := f.spec.Decryption.SecretRef
	if ref == nil || ref.Name == "" {
		return d, nil // kustomize-controller's own keys (cloud KMS): none here
	}
	d.secret = f.Ref.Namespace + "/" + ref.Name
	var s corev1.Secret
	if err := f.kube.Get(ctx, client.ObjectKey{Namespace: f.Ref.Namespace, Name: ref.Name}, &s); err != nil {
		return nil, fmt.Errorf("%s: spec.decryption.secretRef: reading Secret %s: %w", f.Name(), d.secret, err)
	}
	for name, value := range s.Data {
		switch filepath.Ext(name) {
		case ".agekey":
			ids, err := age.ParseIdentities(bytes.NewReader(value))
			if err != nil {
				return nil, fmt.Errorf("%s: Secret %s key %s: not age identities: %w", f.Name(), d.secret, name, err)
			}
			d.age = append(d.age, ids...)
		case ".asc":
			keys, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(value))
			if err != nil {
				return nil, fmt.Errorf("%s: Secret %s key %s: not an armored OpenPGP key: %w", f.Name(), d.secret, name, err)
			}
			d.pgp = append(d.pgp, keys...)
		}
	}
	return d, nil
}

// sopsMetadata is the part of a SOPS file's `sops` key decryption reads.
type sopsMetadata struct {
	Age []struct {
		Recipient string `json:"recipient"`
		Enc       string `json:"enc"`
	} `json:"age"`
	PGP []struct {
		Fingerprint string `json:"fp"`
		Enc         string `json:"enc"`
	} `json:"pgp"`
	KeyGroups         []any  `json:"key_groups"`
	MAC               string `json:"mac"`
	UnencryptedSuffix string `json:"unencrypted_suffix"`
	EncryptedSuffix   string `json:"encrypted_suffix"`
	UnencryptedRegex  string `json:"unencrypted_regex"`
	EncryptedRegex    string `json:"encrypted_regex"`
	KMS               []any  `json:"kms"`
	GCPKMS            []any  `json:"gcp_kms"`
	AzureKV           []any  `json:"azure_kv"`
	HCVault           []any  `json:"hc_vault"`
}

// object decrypts o if it is SOPS-encrypted, into a new node; it reports
// whether it was.
func (d *decryptor) object(o *yaml.RNode) (*yaml.RNode, bool, error) {
	meta := o.Field("sops")
	if meta == nil || meta.Value.IsNilOrEmpty() || meta.Value.Field("mac").IsNilOrEmpty() {
		return o, false, nil
	}
	var m sopsMetadata
	if j, err := meta.Value.MarshalJSON(); err != nil {
		return nil, false, err
	} else if err := json.Unmarshal(j, &m); err != nil {
		return nil, false, fmt.Errorf("its sops metadata: %w", err)
	}
	key, err := d.dataKey(m)
	if err != nil {
		return nil, false, err
	}
	rules, err := m.rules()
	if err != nil {
		return nil, false, err
	}
	out := o.Copy()
	if err := out.PipeE(yaml.Clear("sops")); err != nil {
		return nil, false, err
	}
	if err := decryptTree(out.YNode(), nil, key, rules); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// dataKey opens the file's data key with one of the keys held.
func (d *decryptor) dataKey(m sopsMetadata) ([]byte, error) {
	if len(m.KeyGroups) > 0 {
		return nil, errors.New("it is encrypted with SOPS key groups (Shamir secret sharing), which Sluice does not decrypt: decrypt it with sops, or use a single key group")
	}
	var wanted []string
	for _, a := range m.Age {
		wanted = append(wanted, "age recipient "+a.Recipient)
		if len(d.age) == 0 {
			continue
		}
		r, err := age.Decrypt(armor.NewReader(strings.NewReader(a.Enc)), d.age...)
		if err != nil {
			continue
		}
		if key, err := io.ReadAll(io.LimitReader(r, 1024)); err == nil && len(key) == 32 {
			return key, nil
		}
	}
	for _, p := range m.PGP {
		wanted = append(wanted, "OpenPGP key "+p.Fingerprint)
		if len(d.pgp) == 0 {
			continue
		}
		block, err := pgparmor.Decode(strings.NewReader(p.Enc))
		if err != nil {
			continue
		}
		md, err := openpgp.ReadMessage(block.Body, d.pgp, nil, nil)
		if err != nil {
			continue
		}
		if key, err := io.ReadAll(io.LimitReader(md.UnverifiedBody, 1024)); err == nil && len(key) == 32 {
			return key, nil
		}
	}
	if len(m.KMS)+len(m.GCPKMS)+len(m.AzureKV)+len(m.HCVault) > 0 {
		wanted = append(wanted, "a cloud KMS or Vault key (which Sluice does not use)")
	}
	if len(wanted) == 0 {
		return nil, errors.New("its sops metadata names no key")
	}
	holder := "no decryption Secret (spec.decryption.secretRef)"
	if d.secret != "" {
		holder = "the keys of Secret " + d.secret
	}
	return nil, fmt.Errorf("none of %s opens it: it needs %s", holder, strings.Join(wanted, " or "))
}

// encryptionRules say which values of a SOPS file are encrypted.
type encryptionRules struct {
	unencryptedSuffix, encryptedSuffix string
	unencryptedRegex, encryptedRegex   *regexp.Regexp
}

func (m sopsMetadata) rules() (encryptionRules, error) {
	r := encryptionRules{unencryptedSuffix: m.UnencryptedSuffix, encryptedSuffix: m.EncryptedSuffix}
	var err error
	if m.UnencryptedRegex != "" {
		if r.unencryptedRegex, err = regexp.Compile(m.UnencryptedRegex); err != nil {
			return r, fmt.Errorf("sops.unencrypted_regex: %w", err)
		}
	}
	if m.EncryptedRegex != "" {
		if r.encryptedRegex, err = regexp.Compile(m.EncryptedRegex); err != nil {
			return r, fmt.Errorf("sops.encrypted_regex: %w", err)
		}
	}
	return r, nil
}

// encrypted reports whether the value at path (the keys leading to it)
// was encrypted, by the file's rules.
func (r encryptionRules) encrypted(path []string) bool {
	enc := true
	if r.unencryptedSuffix != "" {
		for _, k := range path {
			if strings.HasSuffix(k, r.unencryptedSuffix) {
				enc = false
				break
			}
		}
	}
	if r.encryptedSuffix != "" {
		enc = false
		for _, k := range path {
			if strings.HasSuffix(k, r.encryptedSuffix) {
				enc = true
				break
			}
		}
	}
	if r.unencryptedRegex != nil {
		for _, k := range path {
			if r.unencryptedRegex.MatchString(k) {
				enc = false
				break
			}
		}
	}
	if r.encryptedRegex != nil {
		enc = false
		for _, k := range path {
			if r.encryptedRegex.MatchString(k) {
				enc = true
				break
			}
		}
	}
	return enc
}

// decryptTree decrypts, in place, every encrypted value under n; path
// is the keys leading to n (a list's items share their list's path).
func decryptTree(n *yaml.Node, path []string, key []byte, rules encryptionRules) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if err := decryptTree(c, path, key, rules); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := decryptTree(n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value), key, rules); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !rules.encrypted(path) {
			return nil
		}
		if n.Tag != "!!str" && n.Tag != "" {
			return fmt.Errorf("%s: an encrypted value must be a string, not %s", strings.Join(path, "."), n.Tag)
		}
		v, tag, err := decryptValue(n.Value, key, strings.Join(path, ":")+":")
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(path, "."), err)
		}
		n.Value, n.Tag, n.Style = v, tag, 0
	}
	return nil
}

var encryptedValue = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.*),iv:(.*),tag:(.*),type:(.*)\]$`)

// decryptValue decrypts one value ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]
// whose additional data is its path, and returns it with its YAML tag.
func decryptValue(s string, key []byte, additional string) (string, string, error) {
	m := encryptedValue.FindStringSubmatch(s)
	if m == nil {
		return "", "", errors.New("the value is not encrypted as SOPS encrypts (ENC[AES256_GCM,...])")
	}
	data, err1 := base64.StdEncoding.DecodeString(m[1])
	iv, err2 := base64.StdEncoding.DecodeString(m[2])
	tag, err3 := base64.StdEncoding.DecodeString(m[3])
	if err := errors.Join(err1, err2, err3); err != nil || len(iv) == 0 {
		return "", "", fmt.Errorf("the encrypted value is malformed: %v", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", "", err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return "", "", err
	}
	plain, err := gcm.Open(nil, iv, append(data, tag...), []byte(additional))
	if err != nil {
		return "", "", errors.New("the value does not decrypt with the file's data key (changed, or moved to another key)")
	}
	switch m[4] {
	case "str", "bytes":
		return string(plain), "!!str", nil
	case "int":
		return string(plain), "!!int", nil
	case "float":
		return string(plain), "!!float", nil
	case "bool":
		return string(plain), "!!bool", nil
	}
	return "", "", fmt.Errorf("unknown SOPS value type %q", m[4])
}
