package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keys"
	sopspgp "github.com/getsops/sops/v3/pgp"
	sopsyaml "github.com/getsops/sops/v3/stores/yaml"
)

// SOPSEncrypt encrypts a YAML document for an age recipient as the sops
// CLI does (`sops encrypt --age R --encrypted-regex REGEX`), through the
// getsops/sops module itself: what a person commits, and Flux decrypts.
// Tests only: the module links every cloud's KMS client.
func SOPSEncrypt(t TB, plain, recipient, encryptedRegex string) string {
	t.Helper()
	key, err := sopsage.MasterKeyFromRecipient(recipient)
	if err != nil {
		t.Fatalf("sops: %v", err)
	}
	return sopsEncrypt(t, plain, key, encryptedRegex)
}

// SOPSEncryptPGP encrypts a YAML document for an OpenPGP key as the sops
// CLI does (`sops encrypt --pgp FINGERPRINT`), with a keyring holding the
// key's public part.
func SOPSEncryptPGP(t TB, plain string, entity *openpgp.Entity, encryptedRegex string) string {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil { // a GnuPG home is private
		t.Fatalf("sops: %v", err)
	}
	var ring bytes.Buffer
	if err := entity.Serialize(&ring); err != nil {
		t.Fatalf("sops: %v", err)
	}
	if err := os.WriteFile(filepath.Join(home, "pubring.gpg"), ring.Bytes(), 0o600); err != nil {
		t.Fatalf("sops: %v", err)
	}
	key := sopspgp.NewMasterKeyFromFingerprint(strings.ToUpper(hex.EncodeToString(entity.PrimaryKey.Fingerprint)))
	sopspgp.GnuPGHome(home).ApplyToMasterKey(key)
	return sopsEncrypt(t, plain, key, encryptedRegex)
}

func sopsEncrypt(t TB, plain string, key keys.MasterKey, encryptedRegex string) string {
	t.Helper()
	store := sopsyaml.NewStore(&config.YAMLStoreConfig{})
	branches, err := store.LoadPlainFile([]byte(plain))
	if err != nil {
		t.Fatalf("sops: %v", err)
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{
		KeyGroups:      []sops.KeyGroup{[]keys.MasterKey{key}},
		EncryptedRegex: encryptedRegex,
		Version:        "3.10.2",
	}}
	// The data key encrypted with the master key itself, as sops's local
	// key service does (which would forget the key's GnuPG home).
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		t.Fatalf("sops: %v", err)
	}
	if err := key.Encrypt(dataKey); err != nil {
		t.Fatalf("sops: %v", err)
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
