package signing

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"golang.org/x/crypto/ssh"
)

// Verifier checks signatures of commits and tags against trusted keys:
// OpenPGP public keys, and SSH keys as git's allowed-signers file lists
// them (or as authorized_keys lines).
type Verifier struct {
	pgp openpgp.EntityList
	ssh []allowedSigner
}

type allowedSigner struct {
	principals string
	key        ssh.PublicKey
}

// ParseVerifier reads trusted keys, each value armored OpenPGP public
// keys or lines of SSH allowed signers ("PRINCIPALS [OPTIONS] KEYTYPE
// KEY") or authorized keys; name says where each came from, for errors.
func ParseVerifier(keys map[string][]byte) (*Verifier, error) {
	v := &Verifier{}
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		data := keys[name]
		if bytes.Contains(data, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----")) {
			ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("%s: not armored OpenPGP public keys: %w", name, err)
			}
			v.pgp = append(v.pgp, ring...)
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			s, err := parseAllowedSigner(line)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", name, n, err)
			}
			v.ssh = append(v.ssh, s)
		}
	}
	if len(v.pgp) == 0 && len(v.ssh) == 0 {
		return nil, errors.New("no key: give armored OpenPGP public keys or SSH allowed signers")
	}
	return v, nil
}

// parseAllowedSigner reads an allowed-signers line, or an authorized_keys
// line (no principals).
func parseAllowedSigner(line string) (allowedSigner, error) {
	first, _, _ := strings.Cut(line, " ")
	if strings.HasPrefix(first, "ssh-") || strings.HasPrefix(first, "ecdsa-") || strings.HasPrefix(first, "sk-") {
		key, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return allowedSigner{}, fmt.Errorf("not an SSH public key: %w", err)
		}
		return allowedSigner{principals: comment, key: key}, nil
	}
	principals, rest, _ := strings.Cut(line, " ")
	fields := strings.Fields(rest)
	// Options (namespaces="git", valid-after=...) come before the key.
	for i := range fields {
		if key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.Join(fields[i:], " "))); err == nil {
			return allowedSigner{principals: principals, key: key}, nil
		}
	}
	return allowedSigner{}, errors.New("not an allowed signer (PRINCIPALS [OPTIONS] KEYTYPE KEY) or an SSH public key")
}

// Verify checks signature over payload and returns who signed: the
// OpenPGP key's identity, or the SSH key's principals and fingerprint.
func (v *Verifier) Verify(payload []byte, signature string) (string, error) {
	switch {
	case signature == "":
		return "", errors.New("it is not signed")
	case strings.Contains(signature, "-----BEGIN PGP SIGNATURE-----"):
		return v.verifyOpenPGP(payload, signature)
	case strings.Contains(signature, "-----BEGIN SSH SIGNATURE-----"):
		return v.verifySSH(payload, signature)
	}
	return "", errors.New("its signature is neither OpenPGP nor SSH (an X.509 signature?)")
}

func (v *Verifier) verifyOpenPGP(payload []byte, signature string) (string, error) {
	e, err := openpgp.CheckArmoredDetachedSignature(v.pgp, bytes.NewReader(payload), strings.NewReader(signature), nil)
	if err != nil {
		return "", fmt.Errorf("its OpenPGP signature does not verify with the trusted keys: %w", err)
	}
	if id := e.PrimaryIdentity(); id != nil {
		return fmt.Sprintf("%s (OpenPGP %X)", id.Name, e.PrimaryKey.Fingerprint), nil
	}
	return fmt.Sprintf("OpenPGP %X", e.PrimaryKey.Fingerprint), nil
}

func (v *Verifier) verifySSH(payload []byte, signature string) (string, error) {
	body := strings.TrimSpace(signature)
	body = strings.TrimPrefix(body, "-----BEGIN SSH SIGNATURE-----")
	body = strings.TrimSuffix(body, "-----END SSH SIGNATURE-----")
	blob, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
	if err != nil || !bytes.HasPrefix(blob, []byte("SSHSIG")) {
		return "", errors.New("its SSH signature is malformed")
	}
	var sig struct {
		Version                      uint32
		PublicKey                    []byte
		Namespace, Reserved, HashAlg string
		Signature                    []byte
	}
	if err := ssh.Unmarshal(blob[6:], &sig); err != nil || sig.Version != 1 {
		return "", errors.New("its SSH signature is malformed")
	}
	if sig.Namespace != "git" {
		return "", fmt.Errorf("its SSH signature is for %q, not git", sig.Namespace)
	}
	pub, err := ssh.ParsePublicKey(sig.PublicKey)
	if err != nil {
		return "", fmt.Errorf("its SSH signature's key: %w", err)
	}
	var trusted *allowedSigner
	for i := range v.ssh {
		if bytes.Equal(v.ssh[i].key.Marshal(), pub.Marshal()) {
			trusted = &v.ssh[i]
			break
		}
	}
	if trusted == nil {
		return "", fmt.Errorf("it is signed by SSH key %s, which is not a trusted key", ssh.FingerprintSHA256(pub))
	}
	var h []byte
	switch sig.HashAlg {
	case "sha512":
		s := sha512.Sum512(payload)
		h = s[:]
	case "sha256":
		s := sha256.Sum256(payload)
		h = s[:]
	default:
		return "", fmt.Errorf("its SSH signature uses hash %q", sig.HashAlg)
	}
	var signed bytes.Buffer
	signed.WriteString("SSHSIG")
	signed.Write(ssh.Marshal(struct {
		Namespace, Reserved, HashAlg string
		Hash                         []byte
	}{sig.Namespace, sig.Reserved, sig.HashAlg, h}))
	var s ssh.Signature
	if err := ssh.Unmarshal(sig.Signature, &s); err != nil {
		return "", errors.New("its SSH signature is malformed")
	}
	if err := pub.Verify(signed.Bytes(), &s); err != nil {
		return "", fmt.Errorf("its SSH signature by %s does not verify: the content was changed", ssh.FingerprintSHA256(pub))
	}
	who := ssh.FingerprintSHA256(pub)
	if trusted.principals != "" {
		who = trusted.principals + " (SSH " + who + ")"
	}
	return who, nil
}

// LoadVerifier reads the CLI's trusted keys: the files given (each
// armored OpenPGP public keys or SSH allowed signers). Nil when none is.
func LoadVerifier(files []string) (*Verifier, error) {
	if len(files) == 0 {
		return nil, nil
	}
	keys := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--trusted-keys: %w", err)
		}
		keys[f] = data
	}
	v, err := ParseVerifier(keys)
	if err != nil {
		return nil, fmt.Errorf("--trusted-keys: %w", err)
	}
	return v, nil
}
