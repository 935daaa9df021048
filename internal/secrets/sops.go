package secrets

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/getsops/sops/v3"
	sopsaes "github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/azkv"
	sopsconfig "github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/gcpkms"
	"github.com/getsops/sops/v3/hcvault"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/kms"
	"github.com/getsops/sops/v3/pgp"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
)

// encryptedRegex is what of a Secret is encrypted: its values, as Flux's
// guide encrypts them. Its name, namespace, labels and annotations stay
// readable for review.
const encryptedRegex = "^(data|stringData)$"

// keyTimeout bounds the encryption of one data key by one recipient (a
// KMS that does not answer).
const keyTimeout = 30 * time.Second

// recipient is one master key, with the setting that names it.
type recipient struct {
	setting string
	key     keys.MasterKey
}

// encrypter encrypts Secrets for a destination's recipients, all in one
// key group: any one of them decrypts.
type encrypter struct {
	recipients []recipient
}

// newEncrypter reads the recipients, each named by its setting in an
// error.
func newEncrypter(r *v1alpha1.SOPS) (*encrypter, error) {
	e := &encrypter{}
	add := func(field string, list []string, parse func(string) ([]keys.MasterKey, error)) error {
		for i, v := range list {
			setting := fmt.Sprintf("spec.destination.sops.%s[%d]", field, i)
			ks, err := parse(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("%s %q: %w", setting, v, err)
			}
			for _, k := range ks {
				e.recipients = append(e.recipients, recipient{setting: setting, key: k})
			}
		}
		return nil
	}
	err := add("age", r.Age, func(v string) ([]keys.MasterKey, error) {
		k, err := sopsage.MasterKeyFromRecipient(v)
		if err != nil {
			return nil, err
		}
		return []keys.MasterKey{k}, nil
	})
	if err == nil {
		err = add("pgp", r.PGP, func(v string) ([]keys.MasterKey, error) {
			return []keys.MasterKey{pgp.NewMasterKeyFromFingerprint(v)}, nil
		})
	}
	if err == nil {
		err = add("awsKMS", r.AWSKMS, func(v string) ([]keys.MasterKey, error) {
			return []keys.MasterKey{kms.NewMasterKeyFromArn(v, nil, "")}, nil
		})
	}
	if err == nil {
		err = add("gcpKMS", r.GCPKMS, func(v string) ([]keys.MasterKey, error) {
			return []keys.MasterKey{gcpkms.NewMasterKeyFromResourceID(v)}, nil
		})
	}
	if err == nil {
		err = add("azureKeyVault", r.AzureKeyVault, func(v string) ([]keys.MasterKey, error) {
			k, err := azkv.NewMasterKeyFromURL(v)
			if err != nil {
				return nil, err
			}
			return []keys.MasterKey{k}, nil
		})
	}
	if err == nil {
		err = add("hcVaultTransit", r.HCVaultTransit, func(v string) ([]keys.MasterKey, error) {
			k, err := hcvault.NewMasterKeyFromURI(v)
			if err != nil {
				return nil, err
			}
			return []keys.MasterKey{k}, nil
		})
	}
	return e, err
}

// contextEncrypter is a master key that encrypts under a context (AWS
// KMS, GCP KMS, Azure Key Vault, Vault).
type contextEncrypter interface {
	EncryptContext(ctx context.Context, dataKey []byte) error
}

// encrypt encrypts one Secret (as canonical JSON) and returns it as the
// node to commit: a data key of its own, encrypted for every recipient,
// its values encrypted with AES-256-GCM, a MAC over the encrypted values
// only (so that a Flux Kustomization that sets a namespace or labels on
// it still decrypts it).
func (e *encrypter) encrypt(ctx context.Context, plain []byte, now time.Time) (*yaml.RNode, error) {
	y, err := sigsyaml.JSONToYAML(plain)
	if err != nil {
		return nil, err
	}
	store := sopsyaml.NewStore(&sopsconfig.YAMLStoreConfig{Indent: 2})
	branches, err := store.LoadPlainFile(y)
	if err != nil {
		return nil, err
	}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		return nil, err
	}
	group := make(sops.KeyGroup, 0, len(e.recipients))
	for _, r := range e.recipients {
		k := r.key
		kctx, cancel := context.WithTimeout(ctx, keyTimeout)
		if ce, ok := k.(contextEncrypter); ok {
			err = ce.EncryptContext(kctx, dataKey)
		} else {
			err = k.Encrypt(dataKey)
		}
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", r.setting, k.ToString(), err)
		}
		group = append(group, k)
	}
	tree := sops.Tree{
		Branches: branches,
		Metadata: sops.Metadata{
			KeyGroups:        []sops.KeyGroup{group},
			EncryptedRegex:   encryptedRegex,
			MACOnlyEncrypted: true,
			Version:          sopsVersion(),
		},
	}
	cipher := sopsaes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		return nil, err
	}
	tree.Metadata.LastModified = now.UTC().Truncate(time.Second)
	if tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339)); err != nil {
		return nil, err
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		return nil, err
	}
	return yaml.Parse(string(out))
}

// sopsModuleVersion is go.mod's SOPS, which a test holds to go.mod: what
// a file records when the build does not say (a test binary's).
const sopsModuleVersion = "3.13.2"

// sopsVersion is the version of SOPS Sluice is built with, which a SOPS
// file records (read from the build: SOPS's own version package brings a
// command-line library along).
var sopsVersion = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/getsops/sops/v3" {
				return strings.TrimPrefix(d.Version, "v")
			}
		}
	}
	return sopsModuleVersion
})
