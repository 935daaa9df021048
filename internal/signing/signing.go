// Package signing signs the commits Sluice makes, as git does with
// `commit -S`: with an SSH key (git's gpg.format=ssh, an SSHSIG signature
// in the commit's gpgsig header) or an OpenPGP key (an armored detached
// signature), so that a branch protected by "require signed commits"
// takes them. No git, gpg or ssh-keygen binary is run.
package signing

import (
	"bytes"
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"
)

// Signer signs a commit's payload (the commit as git encodes it without
// its signature) and returns the signature as git stores it.
type Signer interface {
	Sign(payload []byte) (string, error)
	// Identity says who signs, for messages and provenance: "ssh
	// SHA256:…" or "openpgp 0123ABCD…".
	Identity() string
}

// Sign signs c with s, setting its signature.
func Sign(c *object.Commit, s Signer) error {
	if s == nil {
		return nil
	}
	obj := &plumbing.MemoryObject{}
	c.PGPSignature = ""
	if err := c.EncodeWithoutSignature(obj); err != nil {
		return err
	}
	r, err := obj.Reader()
	if err != nil {
		return err
	}
	payload, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	sig, err := s.Sign(payload)
	if err != nil {
		return fmt.Errorf("signing the commit as %s: %w", s.Identity(), err)
	}
	c.PGPSignature = sig
	return nil
}

// Parse reads a signing key: an OpenSSH private key (PEM "OPENSSH
// PRIVATE KEY", or PKCS#8/PKCS#1) or an armored OpenPGP private key,
// decrypted with passphrase when it is encrypted.
func Parse(key, passphrase []byte) (Signer, error) {
	text := string(key)
	switch {
	case strings.Contains(text, "-----BEGIN PGP PRIVATE KEY BLOCK-----"):
		return parseOpenPGP(key, passphrase)
	case strings.Contains(text, "PRIVATE KEY-----"):
		return parseSSH(key, passphrase)
	}
	return nil, errors.New("not an SSH private key (-----BEGIN OPENSSH PRIVATE KEY-----) or an armored OpenPGP private key (-----BEGIN PGP PRIVATE KEY BLOCK-----)")
}

// sshSigner signs with an SSH key, in the SSHSIG format of namespace
// "git" that `git verify-commit` checks with gpg.ssh.allowedSignersFile.
type sshSigner struct {
	key ssh.Signer
}

func parseSSH(key, passphrase []byte) (Signer, error) {
	var s ssh.Signer
	var err error
	if len(passphrase) > 0 {
		s, err = ssh.ParsePrivateKeyWithPassphrase(key, passphrase)
	} else {
		s, err = ssh.ParsePrivateKey(key)
	}
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, errors.New("the SSH key is encrypted: give its passphrase")
	}
	if err != nil {
		return nil, fmt.Errorf("the SSH key: %w", err)
	}
	return &sshSigner{key: s}, nil
}

func (s *sshSigner) Identity() string { return "ssh " + ssh.FingerprintSHA256(s.key.PublicKey()) }

// PublicKey is the signer's public key in authorized_keys form, for an
// allowed-signers file.
func (s *sshSigner) PublicKey() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.key.PublicKey())))
}

func (s *sshSigner) Sign(payload []byte) (string, error) {
	const namespace, hashAlg = "git", "sha512"
	h := sha512.Sum512(payload)
	// What is signed (PROTOCOL.sshsig): the magic, then the namespace,
	// reserved, hash algorithm and hash, each an SSH string.
	var signed bytes.Buffer
	signed.WriteString("SSHSIG")
	signed.Write(ssh.Marshal(struct {
		Namespace, Reserved, HashAlg string
		Hash                         []byte
	}{namespace, "", hashAlg, h[:]}))
	var sig *ssh.Signature
	var err error
	if as, ok := s.key.(ssh.AlgorithmSigner); ok && s.key.PublicKey().Type() == ssh.KeyAlgoRSA {
		sig, err = as.SignWithAlgorithm(rand.Reader, signed.Bytes(), ssh.KeyAlgoRSASHA512)
	} else {
		sig, err = s.key.Sign(rand.Reader, signed.Bytes())
	}
	if err != nil {
		return "", err
	}
	var blob bytes.Buffer
	blob.WriteString("SSHSIG")
	blob.Write(ssh.Marshal(struct {
		Version                      uint32
		PublicKey                    []byte
		Namespace, Reserved, HashAlg string
		Signature                    []byte
	}{1, s.key.PublicKey().Marshal(), namespace, "", hashAlg, ssh.Marshal(sig)}))
	enc := base64.StdEncoding.EncodeToString(blob.Bytes())
	var out strings.Builder
	out.WriteString("-----BEGIN SSH SIGNATURE-----\n")
	for len(enc) > 70 {
		out.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	out.WriteString(enc + "\n-----END SSH SIGNATURE-----")
	return out.String(), nil
}

// pgpSigner signs with an OpenPGP key: an armored detached signature.
type pgpSigner struct {
	entity *openpgp.Entity
}

func parseOpenPGP(key, passphrase []byte) (Signer, error) {
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(key))
	if err != nil {
		return nil, fmt.Errorf("the OpenPGP key: %w", err)
	}
	var e *openpgp.Entity
	for _, c := range ring {
		if c.PrivateKey != nil {
			e = c
			break
		}
	}
	if e == nil {
		return nil, errors.New("the OpenPGP key holds no private key")
	}
	if e.PrivateKey.Encrypted {
		if len(passphrase) == 0 {
			return nil, errors.New("the OpenPGP key is encrypted: give its passphrase")
		}
		if err := e.DecryptPrivateKeys(passphrase); err != nil {
			return nil, fmt.Errorf("the OpenPGP key's passphrase: %w", err)
		}
	}
	return &pgpSigner{entity: e}, nil
}

func (s *pgpSigner) Identity() string {
	return fmt.Sprintf("openpgp %X", s.entity.PrimaryKey.Fingerprint)
}

func (s *pgpSigner) Sign(payload []byte) (string, error) {
	var out bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&out, s.entity, bytes.NewReader(payload), nil); err != nil {
		return "", err
	}
	return out.String(), nil
}

// Load reads the CLI's signing key: the file at path, else the key
// itself in $SLUICE_SIGNING_KEY; its passphrase in
// $SLUICE_SIGNING_PASSPHRASE. Nil when neither is given: commits stay
// unsigned.
func Load(path string, getenv func(string) string) (Signer, error) {
	var key []byte
	from := "$SLUICE_SIGNING_KEY"
	switch {
	case path != "":
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
		key, from = data, path
	case getenv("SLUICE_SIGNING_KEY") != "":
		key = []byte(getenv("SLUICE_SIGNING_KEY"))
	default:
		return nil, nil
	}
	s, err := Parse(key, []byte(getenv("SLUICE_SIGNING_PASSPHRASE")))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return s, nil
}
