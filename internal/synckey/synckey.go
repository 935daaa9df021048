// Package synckey holds the secret from which a hydration derives what
// must be the same at every hydration of a sync and unguessable from its
// repositories: the values a chart's templates generate (passwords,
// keys, certificates) and the digests that tell an unchanged Secret
// without decrypting it. One key serves many syncs: each sync's own is
// derived from it and the sync's name. The command line reads it from a
// file or $SLUICE_SYNC_KEY, as a signing key; `sluice serve` keeps it in
// a Secret of its own namespace. It is never written anywhere else.
package synckey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// prefix starts a key's text, with its format's version.
const prefix = "sluicekey1."

// Env is the variable the command line reads a key from.
const Env = "SLUICE_SYNC_KEY"

// SecretKey is the key of the Secret `sluice serve` reads its sync key
// from, and SecretName that Secret's default name (in the controller's
// namespace).
const (
	SecretKey  = "key"
	SecretName = "sluice-sync-key"
)

// Key is a sync key: 32 secret bytes, and the time it was made, which is
// the time templates are told it is (now) and generated certificates
// start at.
type Key struct {
	secret  []byte
	Created time.Time
}

// New makes a key from crypto/rand, made now.
func New() Key {
	s := make([]byte, 32)
	rand.Read(s)
	return Key{secret: s, Created: time.Now().UTC().Truncate(time.Second)}
}

// String is the key's text: "sluicekey1.<seconds since 1970>.<base64url>".
// It is secret.
func (k Key) String() string {
	return prefix + strconv.FormatInt(k.Created.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(k.secret)
}

// IsZero reports whether k holds no key.
func (k Key) IsZero() bool { return len(k.secret) == 0 }

// Parse reads a key's text (surrounding space, and comment lines starting
// with #, are ignored).
func Parse(text string) (Key, error) {
	var body string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			if body != "" {
				return Key{}, errors.New("not a sync key: more than one line")
			}
			body = line
		}
	}
	rest, ok := strings.CutPrefix(body, prefix)
	if !ok {
		return Key{}, fmt.Errorf("not a sync key: it does not start with %q (make one with `sluice sync-key new`)", prefix)
	}
	secs, b64, ok := strings.Cut(rest, ".")
	if !ok {
		return Key{}, errors.New("not a sync key: no time")
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n <= 0 {
		return Key{}, fmt.Errorf("not a sync key: its time %q", secs)
	}
	s, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(s) != 32 {
		return Key{}, errors.New("not a sync key: its secret is not 32 bytes of base64url")
	}
	return Key{secret: s, Created: time.Unix(n, 0).UTC()}, nil
}

// Load reads the command line's key: the file path names, else
// $SLUICE_SYNC_KEY; the zero Key when neither is given.
func Load(path string, getenv func(string) string) (Key, error) {
	switch {
	case path != "":
		data, err := os.ReadFile(path)
		if err != nil {
			return Key{}, fmt.Errorf("--sync-key: %w", err)
		}
		k, err := Parse(string(data))
		if err != nil {
			return Key{}, fmt.Errorf("--sync-key %s: %w", path, err)
		}
		return k, nil
	case getenv(Env) != "":
		k, err := Parse(getenv(Env))
		if err != nil {
			return Key{}, fmt.Errorf("$%s: %w", Env, err)
		}
		return k, nil
	}
	return Key{}, nil
}

// For derives a sync's own key from k: the sync's namespace ("" on the
// command line) and name, and its rotation (the value of the annotation
// sluice.dev/rotate-generated, "" when unset). A sync named on the
// command line and the same sync on a cluster derive one key only when
// both have no namespace.
func (k Key) For(namespace, name, rotation string) []byte {
	m := hmac.New(sha256.New, k.secret)
	fmt.Fprintf(m, "sluice sync key v1\x00%s\x00%s\x00%s", namespace, name, rotation)
	return m.Sum(nil)
}
