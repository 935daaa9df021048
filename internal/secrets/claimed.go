package secrets

import (
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	sopsconfig "github.com/getsops/sops/v3/config"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
)

// encValue is SOPS's form of an encrypted value (its aes package's).
var encValue = regexp.MustCompile(`^ENC\[AES256_GCM,data:([A-Za-z0-9+/=]*),iv:([A-Za-z0-9+/=]+),tag:([A-Za-z0-9+/=]+),type:(str|int|float|bool|bytes)\]$`)

// wellFormed reports whether v is a value SOPS encrypted: its IV of 32
// bytes and its tag of 16, as SOPS writes them.
func wellFormed(v string) bool {
	m := encValue.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	iv, err1 := base64.StdEncoding.DecodeString(m[2])
	tag, err2 := base64.StdEncoding.DecodeString(m[3])
	_, err3 := base64.StdEncoding.DecodeString(m[1])
	return err1 == nil && err2 == nil && err3 == nil && len(iv) == 32 && len(tag) == 16
}

// claimed decides what a Secret that carries SOPS metadata is: really
// encrypted (every data and stringData value SOPS's ciphertext, the
// metadata whole with its MAC encrypted, and encrypted for none but the
// destination's recipients), kept as it is; not encrypted at all (no
// value is ciphertext: an empty or copied sops field), to be dealt with
// as any readable Secret; or neither, refused, naming what is wrong. A
// destination that names no recipient (its deployer's keys are not
// Sluice's to know) keeps any whole SOPS file.
// Its MAC is checked by whoever decrypts it: Sluice holds no private key.
func claimed(o *yaml.RNode, id string, recipients *v1alpha1.SOPS) (real bool, err error) {
	var plain, enc []string
	for field, v := range Values(o) {
		if wellFormed(v) {
			enc = append(enc, field)
		} else {
			plain = append(plain, field)
		}
	}
	sort.Strings(plain)
	switch {
	case len(enc) == 0:
		return false, nil
	case len(plain) > 0:
		return false, fmt.Errorf("Secret %s carries SOPS metadata, but %s %s not SOPS's ciphertext: encrypt the whole Secret with sops, or commit it readable in the source and let Sluice encrypt it", id, strings.Join(plain, ", "), isAre(len(plain)))
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return false, err
	}
	tree, err := sopsyaml.NewStore(&sopsconfig.YAMLStoreConfig{}).LoadEncryptedFile(data)
	if err != nil {
		return false, fmt.Errorf("Secret %s: its SOPS metadata: %w", id, err)
	}
	md := tree.Metadata
	if !wellFormed(md.MessageAuthenticationCode) {
		return false, fmt.Errorf("Secret %s: its SOPS metadata has no MAC: encrypt it with sops", id)
	}
	want := map[string]bool{}
	if !recipients.Empty() {
		e, err := newEncrypter(recipients)
		if err != nil {
			return false, err
		}
		for _, r := range e.recipients {
			want[strings.TrimSpace(r.key.ToString())] = true
		}
	}
	var has, foreign []string
	for _, g := range md.KeyGroups {
		for _, k := range g {
			s := strings.TrimSpace(k.ToString())
			has = append(has, s)
			if !want[s] {
				foreign = append(foreign, s)
			}
		}
	}
	switch {
	case len(has) == 0:
		return false, fmt.Errorf("Secret %s: its SOPS metadata names no recipient", id)
	case len(foreign) > 0 && len(want) > 0:
		slices.Sort(foreign)
		return false, fmt.Errorf("Secret %s is SOPS-encrypted for %s, which spec.destination.sops does not name: whoever holds that key could read it; encrypt it for the destination's recipients", id, strings.Join(foreign, ", "))
	}
	return true, nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// withoutSOPS is o without its sops field.
func withoutSOPS(o *yaml.RNode) (*yaml.RNode, error) {
	c := o.Copy()
	if _, err := c.Pipe(yaml.Clear("sops")); err != nil {
		return nil, errors.New("removing its sops field: " + err.Error())
	}
	return c, nil
}
