package testenv

import (
	"time"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	"github.com/getsops/sops/v3/keyservice"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

// SOPSEncrypt encrypts a YAML document for an age recipient as the sops
// CLI does (`sops encrypt --age R --encrypted-regex REGEX`), through the
// getsops/sops module itself: what a person commits, and Flux decrypts.
// Tests only: the module links every cloud's KMS client.
func SOPSEncrypt(t TB, plain, recipient, encryptedRegex string) string {
	t.Helper()
	store := sopsyaml.NewStore(&config.YAMLStoreConfig{})
	branches, err := store.LoadPlainFile([]byte(plain))
	if err != nil {
		t.Fatalf("sops: %v", err)
	}
	key, err := sopsage.MasterKeyFromRecipient(recipient)
	if err != nil {
		t.Fatalf("sops: %v", err)
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{
		KeyGroups:      []sops.KeyGroup{[]keys.MasterKey{key}},
		EncryptedRegex: encryptedRegex,
		Version:        "3.10.2",
	}}
	dataKey, errs := tree.GenerateDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewLocalClient()})
	if len(errs) > 0 {
		t.Fatalf("sops: %v", errs)
	}
	cipher := aes.NewCipher()
	mac, err := tree.Encrypt(dataKey, cipher)
	if err != nil {
		t.Fatalf("sops: %v", err)
	}
	tree.Metadata.LastModified = time.Now().UTC()
	if tree.Metadata.MessageAuthenticationCode, err = cipher.Encrypt(mac, dataKey, tree.Metadata.LastModified.Format(time.RFC3339)); err != nil {
		t.Fatalf("sops: %v", err)
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatalf("sops: %v", err)
	}
	return string(out)
}
