package signing

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// The line's options, as ssh-keygen -Y verify (git's verifier)
	// reads them: the namespaces the key may sign for (patterns), and
	// the time its signatures must be made in (the commit's or tag's).
	namespaces              []string
	validAfter, validBefore time.Time
	certAuthority           bool
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
		// The parser of authorized_keys lines reads the options too.
		if key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(strings.Join(fields[i:], " "))); err == nil {
			s := allowedSigner{principals: principals, key: key}
			if err := s.options(strings.Join(append(slices.Clone(fields[:i]), opts...), ",")); err != nil {
				return allowedSigner{}, err
			}
			return s, nil
		}
	}
	return allowedSigner{}, errors.New("not an allowed signer (PRINCIPALS [OPTIONS] KEYTYPE KEY) or an SSH public key")
}

// options reads an allowed signer's options: comma-separated, values in
// double quotes where they hold commas (ssh-keygen(1), ALLOWED SIGNERS).
func (s *allowedSigner) options(opts string) error {
	for opts != "" {
		var opt string
		inQuote := false
		i := 0
		for ; i < len(opts); i++ {
			if opts[i] == '"' {
				inQuote = !inQuote
			} else if opts[i] == ',' && !inQuote {
				break
			}
		}
		if inQuote {
			return fmt.Errorf("option %q: a quote is not closed", opts)
		}
		opt, opts = opts[:i], strings.TrimPrefix(opts[i:], ",")
		name, value, _ := strings.Cut(opt, "=")
		value = strings.Trim(value, `"`)
		var err error
		switch strings.ToLower(name) {
		case "cert-authority":
			s.certAuthority = true
		case "namespaces":
			s.namespaces = strings.Split(value, ",")
		case "valid-after":
			s.validAfter, err = sshTime(value)
		case "valid-before":
			s.validBefore, err = sshTime(value)
		default:
			return fmt.Errorf("option %q is not one git's verifier knows (cert-authority, namespaces, valid-after, valid-before)", name)
		}
		if err != nil {
			return fmt.Errorf("option %s: %w", name, err)
		}
	}
	return nil
}

// sshTime reads ssh-keygen's times: YYYYMMDD, YYYYMMDDHHMM or
// YYYYMMDDHHMMSS, in UTC with a trailing Z, else in local time.
func sshTime(v string) (time.Time, error) {
	loc := time.Local
	if strings.HasSuffix(v, "Z") {
		v, loc = strings.TrimSuffix(v, "Z"), time.UTC
	}
	for _, layout := range []string{"20060102", "200601021504", "20060102150405"} {
		if len(v) == len(layout) {
			if t, err := time.ParseInLocation(layout, v, loc); err == nil {
				return t, nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time as YYYYMMDD[HHMM[SS]][Z]", v)
}

// signedAt is when a commit or tag says it was made: its committer's
// or tagger's time, which git has the SSH verifier check a key's
// validity at.
func signedAt(payload []byte) (time.Time, bool) {
	for _, line := range strings.Split(string(payload), "\n") {
		if line == "" {
			break // the headers end
		}
		for _, h := range []string{"committer ", "tagger "} {
			if rest, ok := strings.CutPrefix(line, h); ok {
				f := strings.Fields(rest[strings.LastIndexByte(rest, '>')+1:])
				if len(f) >= 1 {
					if secs, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						return time.Unix(secs, 0), true
					}
				}
			}
		}
	}
	return time.Time{}, false
}

// allows checks a signature of namespace made at t against the signer's
// options, as ssh-keygen -Y verify does.
func (s *allowedSigner) allows(namespace string, t time.Time, known bool) error {
	who := ssh.FingerprintSHA256(s.key)
	if s.certAuthority {
		return fmt.Errorf("SSH key %s is trusted as a cert-authority: it signs certificates, and only signatures by certificates it signed are accepted, which Sluice does not check", who)
	}
	if len(s.namespaces) > 0 && !slices.ContainsFunc(s.namespaces, func(p string) bool { ok, _ := path.Match(p, namespace); return ok }) {
		return fmt.Errorf("SSH key %s may sign for %s only (its namespaces option), not %s", who, strings.Join(s.namespaces, ","), namespace)
	}
	if !s.validAfter.IsZero() || !s.validBefore.IsZero() {
		if !known {
			return fmt.Errorf("SSH key %s is valid for a time only, and the signed object says no time", who)
		}
		if !s.validAfter.IsZero() && t.Before(s.validAfter) {
			return fmt.Errorf("it was made %s, before SSH key %s became valid (%s)", t.UTC().Format(time.RFC3339), who, s.validAfter.UTC().Format(time.RFC3339))
		}
		if !s.validBefore.IsZero() && t.After(s.validBefore) {
			return fmt.Errorf("it was made %s, after SSH key %s stopped being valid (%s)", t.UTC().Format(time.RFC3339), who, s.validBefore.UTC().Format(time.RFC3339))
		}
	}
	return nil
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
	// Any line listing the key may allow the signature, as for
	// ssh-keygen -Y verify.
	var trusted *allowedSigner
	var refused error
	at, known := signedAt(payload)
	for i := range v.ssh {
		if !bytes.Equal(v.ssh[i].key.Marshal(), pub.Marshal()) {
			continue
		}
		if err := v.ssh[i].allows(sig.Namespace, at, known); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		trusted = &v.ssh[i]
		break
	}
	if trusted == nil && refused != nil {
		return "", refused
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
