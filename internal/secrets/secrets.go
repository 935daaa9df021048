// Package secrets decides what becomes of the Secrets a render gives
// before they are committed: encrypted with SOPS for the destination's
// recipients, in the form kustomize-controller's spec.decryption reads;
// left out; or, when asked, left readable. A Secret is never committed
// readable unless its sync says so, and an unchanged Secret keeps the
// encrypted form it was committed in, byte for byte: SOPS encrypts with a
// new data key and new IVs each time, so without that every hydration
// would rewrite every Secret.
package secrets

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
)

// Options say what becomes of a render's Secrets.
type Options struct {
	// Policy is spec.destination.secrets (v1alpha1.SecretsEncrypt when
	// empty).
	Policy string
	// Recipients are spec.destination.sops.
	Recipients *v1alpha1.SOPS
	// Tool is the folder's deployer (spec.deployer.tool).
	Tool string
	// Key is the sync's own key: Secrets are told unchanged by a digest
	// under it. KeyMissing says why there is none, and how to pass it.
	Key        []byte
	KeyMissing string
	// Previous are the Secrets the folder holds, encrypted, by ID
	// ("namespace/name"), and Records what the folder's record says of
	// them: a Secret whose digest and recipients are the recorded ones
	// keeps its previous encrypted form.
	Previous map[string]*yaml.RNode
	Records  []v1alpha1.SecretRecord
	// Origins gives an object's source (a chart's template), for errors.
	Origins func(*yaml.RNode) string
	// Now is the time SOPS records as the encryption's (its
	// lastmodified); the default is time.Now.
	Now func() time.Time
}

// Sealed is a render's objects with its Secrets dealt with.
type Sealed struct {
	// Objects are the objects to commit, each Secret encrypted (or left
	// out).
	Objects []*yaml.RNode
	// Records say what became of each Secret, without its values.
	Records []v1alpha1.SecretRecord
	// Encrypted counts the Secrets encrypted anew (not kept as they
	// were).
	Encrypted int
	// Keys say, for each Secret encrypted ("namespace/name"), what
	// became of each of its keys since the folder's record: Added,
	// Changed or Unchanged (Unknown where the record holds no digest of
	// it). Values themselves are never compared across keys.
	Keys map[string]map[string]KeyChange
}

// KeyChange is what became of one key of a Secret.
type KeyChange string

// What became of a key.
const (
	Added     KeyChange = "added"
	Changed   KeyChange = "changed"
	Unchanged KeyChange = "unchanged"
	Unknown   KeyChange = "unknown"
)

// ErrReadable is the error of a Secret that would be committed readable.
var ErrReadable = errors.New("would be committed readable")

// Seal deals with the Secrets of objs as o says. It fails, naming the
// Secret (kind, namespace, name and source) and the ways out, rather than
// commit a Secret readable that its sync does not say may be.
func Seal(ctx context.Context, objs []*yaml.RNode, o Options) (*Sealed, error) {
	policy := o.Policy
	if policy == "" {
		policy = v1alpha1.SecretsEncrypt
	}
	out := &Sealed{}
	var enc *encrypter
	for _, obj := range objs {
		if !IsSecret(obj) {
			if i, ok := nestedSecret(obj); ok {
				return nil, fmt.Errorf("%s %s/%s holds a Secret in items[%d], which kubectl applies as a Secret: Sluice cannot encrypt it there; make it a List (kind ending in List), or take the Secret out", obj.GetKind(), obj.GetNamespace(), obj.GetName(), i)
			}
			out.Objects = append(out.Objects, obj)
			continue
		}
		id := obj.GetNamespace() + "/" + obj.GetName()
		rec := v1alpha1.SecretRecord{Object: "Secret " + id, Keys: dataKeys(obj)}
		where := ""
		if o.Origins != nil && o.Origins(obj) != "" {
			where = " (from " + o.Origins(obj) + ")"
		}
		if err := validName(obj); err != nil {
			return nil, fmt.Errorf("Secret %s%s: %w", strconv.QuoteToASCII(id), where, err)
		}
		real := false
		if isEncrypted(obj) {
			var err error
			if real, err = claimed(obj, id, o.Recipients); err != nil {
				return nil, fmt.Errorf("%w%s", err, where)
			}
			if !real {
				// No value is ciphertext: a readable Secret, whatever
				// its sops field says.
				if obj, err = withoutSOPS(obj); err != nil {
					return nil, fmt.Errorf("Secret %s%s: %w", id, where, err)
				}
			}
		}
		switch {
		case real:
			rec.Committed = v1alpha1.SecretAsIs
			out.Objects = append(out.Objects, obj)
		case policy == v1alpha1.SecretsOmit:
			rec.Committed = v1alpha1.SecretOmitted
		case policy == v1alpha1.SecretsPlaintext:
			rec.Committed = v1alpha1.SecretPlaintext
			out.Objects = append(out.Objects, obj)
		case o.Recipients.Empty():
			return nil, fmt.Errorf("Secret %s%s %w: %s", id, where, ErrReadable, waysOut(o.Tool))
		default:
			if len(o.Key) == 0 {
				return nil, fmt.Errorf("Secret %s%s: telling whether it changed, without decrypting it, needs the sync key: %s", id, where, o.KeyMissing)
			}
			plain, err := canonical(obj)
			if err != nil {
				return nil, fmt.Errorf("Secret %s%s: %w", id, where, err)
			}
			rec.Committed = v1alpha1.SecretEncrypted
			rec.Digest = digest(o.Key, plain)
			rec.Recipients = recipientsDigest(o.Recipients)
			rec.Values = valueDigests(o.Key, id, obj)
			if out.Keys == nil {
				out.Keys = map[string]map[string]KeyChange{}
			}
			out.Keys[id] = keyChanges(o.Records, rec)
			if prev := o.Previous[id]; prev != nil && recorded(o.Records, rec) {
				out.Objects = append(out.Objects, prev)
				break
			}
			if enc == nil {
				if enc, err = newEncrypter(o.Recipients); err != nil {
					return nil, err
				}
			}
			sealed, err := enc.encrypt(ctx, plain, o.now())
			if err != nil {
				return nil, fmt.Errorf("encrypting Secret %s%s: %w", id, where, err)
			}
			out.Objects = append(out.Objects, sealed)
			out.Encrypted++
		}
		out.Records = append(out.Records, rec)
	}
	sort.Slice(out.Records, func(i, j int) bool { return out.Records[i].Object < out.Records[j].Object })
	return out, nil
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// waysOut says how a sync may commit its Secrets.
func waysOut(tool string) string {
	switch tool {
	case v1alpha1.DeployerArgoCD:
		return "Argo CD cannot decrypt SOPS by itself, so an encrypted Secret cannot be committed for it either: leave Secrets out with spec.destination.secrets: omit (External Secrets, Sealed Secrets or argocd-vault-plugin provides them), or commit them readable with spec.destination.secrets: plaintext"
	case v1alpha1.DeployerKubectl:
		return "kubectl apply cannot decrypt SOPS: leave Secrets out with spec.destination.secrets: omit (External Secrets or Sealed Secrets provides them), or commit them readable with spec.destination.secrets: plaintext"
	}
	return "name the recipients it is encrypted for in spec.destination.sops (age, pgp, awsKMS, gcpKMS, azureKeyVault, hcVaultTransit: kustomize-controller's spec.decryption decrypts it), " +
		"or leave Secrets out with spec.destination.secrets: omit (External Secrets or Sealed Secrets provides them), or commit them readable with spec.destination.secrets: plaintext"
}

// validName refuses a Secret whose name, namespace or keys the API
// server refuses: a name of look-alike letters ("grаfana", with a
// Cyrillic а) would pass for another Secret in a review.
func validName(o *yaml.RNode) error {
	if errs := validation.IsDNS1123Subdomain(o.GetName()); len(errs) > 0 {
		return fmt.Errorf("metadata.name %s: %s", strconv.QuoteToASCII(o.GetName()), strings.Join(errs, "; "))
	}
	if ns := o.GetNamespace(); ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("metadata.namespace %s: %s", strconv.QuoteToASCII(ns), strings.Join(errs, "; "))
		}
	}
	for _, k := range dataKeys(o) {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			return fmt.Errorf("key %s: %s", strconv.QuoteToASCII(k), strings.Join(errs, "; "))
		}
	}
	return nil
}

// nestedSecret finds a Secret in an object's items, which kubectl (and
// Argo CD) unwrap whatever the object's kind: a List the render did not
// expand because its kind does not end in List.
func nestedSecret(o *yaml.RNode) (int, bool) {
	items := o.Field("items")
	if items == nil || items.Value == nil || items.Value.YNode().Kind != yaml.SequenceNode {
		return 0, false
	}
	elems, _ := items.Value.Elements()
	for i, e := range elems {
		if e.YNode().Kind != yaml.MappingNode {
			continue
		}
		if IsSecret(e) {
			return i, true
		}
		if _, ok := nestedSecret(e); ok {
			return i, true
		}
	}
	return 0, false
}

// isEncrypted reports whether a Secret is SOPS-encrypted already (the
// source holds it so).
func isEncrypted(o *yaml.RNode) bool {
	return o.Field("sops") != nil
}

// dataKeys are a Secret's data and stringData keys, sorted.
func dataKeys(o *yaml.RNode) []string {
	var keys []string
	for _, f := range []string{"data", "stringData"} {
		if m := o.Field(f); m != nil && m.Value != nil {
			if names, err := m.Value.Fields(); err == nil {
				keys = append(keys, names...)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// canonical is the Secret as JSON with its keys sorted (the form
// kustomize-controller reads an object in when it decrypts it).
func canonical(o *yaml.RNode) ([]byte, error) {
	data, err := o.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// digest is an HMAC of a Secret's content under the sync key: a record
// may show it, as it says nothing of the content to whoever lacks the
// key.
func digest(key, plain []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("sluice secret v1\x00"))
	m.Write(plain)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// valueDigests digests each of a Secret's values under the sync key,
// each bound to the Secret (id) and its key, so that no two can be
// compared: a value moved to another key, or given to another Secret,
// digests otherwise.
func valueDigests(key []byte, id string, o *yaml.RNode) map[string]string {
	out := map[string]string{}
	for k, v := range Values(o) {
		h := hmac.New(sha256.New, key)
		fmt.Fprintf(h, "sluice secret value v1\x00%s\x00%s\x00%s", id, k, v)
		out[k] = hex.EncodeToString(h.Sum(nil)[:16])
	}
	return out
}

// keyChanges says what became of each key of rec since the records.
func keyChanges(records []v1alpha1.SecretRecord, rec v1alpha1.SecretRecord) map[string]KeyChange {
	var prev *v1alpha1.SecretRecord
	for i := range records {
		if records[i].Object == rec.Object {
			prev = &records[i]
		}
	}
	out := map[string]KeyChange{}
	for k, d := range rec.Values {
		switch was, ok := "", false; {
		case prev == nil:
			out[k] = Added
		case prev.Values == nil:
			out[k] = Unknown
		default:
			if was, ok = prev.Values[k]; !ok {
				out[k] = Added
			} else if was == d {
				out[k] = Unchanged
			} else {
				out[k] = Changed
			}
		}
	}
	return out
}

// recipientsDigest tells whether a Secret was encrypted for today's
// recipients.
func recipientsDigest(r *v1alpha1.SOPS) string {
	data, _ := json.Marshal(r)
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// recorded reports whether the folder's record holds rec as it is now.
func recorded(records []v1alpha1.SecretRecord, rec v1alpha1.SecretRecord) bool {
	for _, r := range records {
		if r.Object == rec.Object {
			return r.Committed == v1alpha1.SecretEncrypted && r.Digest == rec.Digest && r.Recipients == rec.Recipients
		}
	}
	return false
}

// Redact says what a Secret file holds without a value: its keys.
func Redact(o *yaml.RNode) string {
	return fmt.Sprintf("Secret %s/%s: keys %s", o.GetNamespace(), o.GetName(), strings.Join(dataKeys(o), ", "))
}
