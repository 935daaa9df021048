package render

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/blowfish"
)

// certificate is what sprig's certificate functions give a template: a
// PEM certificate and its PEM private key.
type certificate struct {
	Cert string
	Key  string
}

// cryptoFuncs are sprig's key, certificate, encryption and hashing
// functions that draw randomness, drawing it from the call's seed: a key
// of the same template and arguments is the same key at every render.
// Their outputs have sprig's forms (PEM types, key sizes, certificate
// fields), so a chart reads them as it reads sprig's.
func (gen *generator) cryptoFuncs() map[string]any {
	key := func(fn, typ string) (crypto.Signer, error) {
		r, err := gen.stream(fn, typ)
		if err != nil {
			return nil, err
		}
		k, err := deterministicKey(r, typ)
		if err == nil {
			gen.registerKey(fn, k)
		}
		return k, err
	}
	base := func(fn, cn string, ips, dns []any, days int) (*x509.Certificate, *rand.ChaCha8, error) {
		r, err := gen.stream(fn, cn, ips, dns, days)
		if err != nil {
			return nil, nil, err
		}
		now, err := gen.now()
		if err != nil {
			return nil, nil, err
		}
		t, err := certTemplate(r, cn, ips, dns, days, now)
		return t, r, err
	}
	return map[string]any{
		"genPrivateKey": func(typ string) (string, error) {
			k, err := key("genPrivateKey", typ)
			if err != nil {
				return "", err
			}
			return pemKey(k)
		},
		"buildCustomCert": buildCustomCert,
		"genCA": func(cn string, days int) (certificate, error) {
			t, r, err := base("genCA", cn, nil, nil, days)
			if err != nil {
				return certificate{}, err
			}
			k, err := deterministicKey(r, "rsa2048")
			if err != nil {
				return certificate{}, err
			}
			gen.registerKey("genCA", k)
			return authority(t, k)
		},
		"genCAWithKey": func(cn string, days int, keyPEM string) (certificate, error) {
			t, _, err := base("genCAWithKey", cn, nil, nil, days)
			if err != nil {
				return certificate{}, err
			}
			k, err := parseKeyPEM(keyPEM)
			if err != nil {
				return certificate{}, fmt.Errorf("parsing private key: %w", err)
			}
			return authority(t, k)
		},
		"genSelfSignedCert": func(cn string, ips, dns []any, days int) (certificate, error) {
			t, r, err := base("genSelfSignedCert", cn, ips, dns, days)
			if err != nil {
				return certificate{}, err
			}
			k, err := deterministicKey(r, "rsa2048")
			if err != nil {
				return certificate{}, err
			}
			gen.registerKey("genSelfSignedCert", k)
			return sign(t, k, t, k)
		},
		"genSelfSignedCertWithKey": func(cn string, ips, dns []any, days int, keyPEM string) (certificate, error) {
			t, _, err := base("genSelfSignedCertWithKey", cn, ips, dns, days)
			if err != nil {
				return certificate{}, err
			}
			k, err := parseKeyPEM(keyPEM)
			if err != nil {
				return certificate{}, fmt.Errorf("parsing private key: %w", err)
			}
			return sign(t, k, t, k)
		},
		"genSignedCert": func(cn string, ips, dns []any, days int, ca certificate) (certificate, error) {
			t, r, err := base("genSignedCert", cn, ips, dns, days)
			if err != nil {
				return certificate{}, err
			}
			k, err := deterministicKey(r, "rsa2048")
			if err != nil {
				return certificate{}, err
			}
			gen.registerKey("genSignedCert", k)
			return signedBy(t, k, ca)
		},
		"genSignedCertWithKey": func(cn string, ips, dns []any, days int, ca certificate, keyPEM string) (certificate, error) {
			t, _, err := base("genSignedCertWithKey", cn, ips, dns, days)
			if err != nil {
				return certificate{}, err
			}
			k, err := parseKeyPEM(keyPEM)
			if err != nil {
				return certificate{}, fmt.Errorf("parsing private key: %w", err)
			}
			return signedBy(t, k, ca)
		},
		"encryptAES": func(password, plaintext string) (string, error) {
			if plaintext == "" {
				return "", nil
			}
			r, err := gen.stream("encryptAES", password, plaintext)
			if err != nil {
				return "", err
			}
			return encryptAES(r, password, plaintext)
		},
		"bcrypt": func(password string) (string, error) {
			r, err := gen.stream("bcrypt", password)
			if err != nil {
				return "", err
			}
			return bcryptHash(r, password), nil
		},
		"htpasswd": func(user, password string) (string, error) {
			if strings.Contains(user, ":") {
				return "invalid username: " + user, nil // sprig's answer
			}
			r, err := gen.stream("htpasswd", user, password)
			if err != nil {
				return "", err
			}
			return user + ":" + bcryptHash(r, password), nil
		},
	}
}

// registerKey registers what of a generated private key is secret: its
// private numbers (an RSA key's exponent and primes, an ECDSA scalar, an
// Ed25519 seed), as the bytes they are (found in a PEM's base64 at any
// alignment) and as that base64 (found in the base64 of a whole PEM).
// Its public numbers, which its certificate holds too, are not secret.
func (gen *generator) registerKey(fn string, k crypto.Signer) {
	var parts [][]byte
	switch k := k.(type) {
	case *rsa.PrivateKey:
		parts = append(parts, k.D.Bytes())
		for _, p := range k.Primes {
			parts = append(parts, p.Bytes())
		}
	case *ecdsa.PrivateKey:
		if b, err := k.Bytes(); err == nil {
			parts = append(parts, b)
		}
	case ed25519.PrivateKey:
		parts = append(parts, k.Seed())
	}
	for _, p := range parts {
		bits := float64(8 * len(p))
		gen.register(fn, string(p), bits)
		for shift := 0; shift < 3; shift++ {
			e := base64.StdEncoding.EncodeToString(append(make([]byte, shift), p...))
			from, to := 0, (shift+len(p))/3*4
			if shift > 0 {
				from = 4
			}
			if to > from {
				gen.register(fn, e[from:to], bits)
			}
		}
	}
}

// rsaKeys keeps the RSA keys made from a seed: finding primes is the
// costly part, and a worker renders the same sync again and again.
var rsaKeys = struct {
	sync.Mutex
	m map[string]*rsa.PrivateKey
}{m: map[string]*rsa.PrivateKey{}}

// deterministicKey makes a private key of sprig's genPrivateKey types
// ("rsa" is 4096 bits, as sprig's; "rsa2048" is the certificate
// functions' key) from r alone. Go's own generators ignore the reader
// they are given (Go 1.26), so the keys are made here: primes drawn from
// r and tested, a P-256 scalar drawn from r, an Ed25519 seed read from r.
func deterministicKey(r *rand.ChaCha8, typ string) (crypto.Signer, error) {
	switch typ {
	case "", "rsa":
		return rsaKey(r, 4096)
	case "rsa2048":
		return rsaKey(r, 2048)
	case "ecdsa":
		n := elliptic.P256().Params().N
		b := make([]byte, 32)
		for {
			r.Read(b)
			if k := new(big.Int).SetBytes(b); k.Sign() > 0 && k.Cmp(n) < 0 {
				return ecdsa.ParseRawPrivateKey(elliptic.P256(), b)
			}
		}
	case "ed25519":
		seed := make([]byte, ed25519.SeedSize)
		r.Read(seed)
		return ed25519.NewKeyFromSeed(seed), nil
	case "dsa":
		return nil, fmt.Errorf("genPrivateKey \"dsa\": a DSA key %w (Go makes DSA parameters only at random); use ecdsa or ed25519", ErrUnstable)
	}
	return nil, fmt.Errorf("genPrivateKey: unknown key type %q", typ)
}

func rsaKey(r *rand.ChaCha8, bits int) (*rsa.PrivateKey, error) {
	var id [32]byte
	r.Read(id[:]) // the key's identity in the cache: the stream's start
	cacheKey := fmt.Sprintf("%d:%x", bits, id)
	rsaKeys.Lock()
	k, ok := rsaKeys.m[cacheKey]
	rsaKeys.Unlock()
	if ok {
		return k, nil
	}
	e := big.NewInt(65537)
	one := big.NewInt(1)
	for {
		p, q := prime(r, bits/2), prime(r, bits-bits/2)
		if p.Cmp(q) == 0 {
			continue
		}
		n := new(big.Int).Mul(p, q)
		if n.BitLen() != bits {
			continue
		}
		phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
		d := new(big.Int).ModInverse(e, phi)
		if d == nil {
			continue
		}
		k = &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: n, E: int(e.Int64())}, D: d, Primes: []*big.Int{p, q}}
		k.Precompute()
		if err := k.Validate(); err != nil {
			continue
		}
		rsaKeys.Lock()
		if len(rsaKeys.m) > 256 {
			clear(rsaKeys.m)
		}
		rsaKeys.m[cacheKey] = k
		rsaKeys.Unlock()
		return k, nil
	}
}

// smallPrimes screen prime candidates before the costly tests.
var smallPrimes = []uint64{3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53}

var smallPrimesProduct = func() *big.Int {
	p := big.NewInt(1)
	for _, s := range smallPrimes {
		p.Mul(p, new(big.Int).SetUint64(s))
	}
	return p
}()

// prime draws odd numbers of exactly bits bits, the top two set (so that
// the product of two has all its bits), until one is prime.
func prime(r *rand.ChaCha8, bits int) *big.Int {
	b := make([]byte, (bits+7)/8)
	excess := uint(len(b)*8 - bits)
	mod := new(big.Int)
	for {
		r.Read(b)
		b[0] &= 0xff >> excess
		if excess < 7 {
			b[0] |= 0xc0 >> excess
		} else {
			b[0] |= 1
			b[1] |= 0x80
		}
		b[len(b)-1] |= 1
		p := new(big.Int).SetBytes(b)
		m := mod.Mod(p, smallPrimesProduct).Uint64()
		composite := false
		for _, s := range smallPrimes {
			if m%s == 0 {
				composite = true
				break
			}
		}
		if !composite && p.ProbablyPrime(20) {
			return p
		}
	}
}

// certTemplate is sprig's certificate template, its serial number drawn
// from r and its validity starting at now.
func certTemplate(r *rand.ChaCha8, cn string, ips, dns []any, days int, now time.Time) (*x509.Certificate, error) {
	var addrs []net.IP
	for _, ip := range ips {
		s, ok := ip.(string)
		if !ok {
			return nil, fmt.Errorf("error parsing ip: %v is not a string", ip)
		}
		a := net.ParseIP(s)
		if a == nil {
			return nil, fmt.Errorf("error parsing ip: %s", s)
		}
		addrs = append(addrs, a)
	}
	var names []string
	for _, d := range dns {
		s, ok := d.(string)
		if !ok {
			return nil, fmt.Errorf("error processing alternate dns name: %v is not a string", d)
		}
		names = append(names, s)
	}
	serial := make([]byte, 16)
	r.Read(serial)
	return &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(serial),
		Subject:               pkix.Name{CommonName: cn},
		IPAddresses:           addrs,
		DNSNames:              names,
		NotBefore:             now,
		NotAfter:              now.Add(24 * time.Hour * time.Duration(days)),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}, nil
}

func authority(t *x509.Certificate, k crypto.Signer) (certificate, error) {
	t.KeyUsage = x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
	t.IsCA = true
	return sign(t, k, t, k)
}

func signedBy(t *x509.Certificate, k crypto.Signer, ca certificate) (certificate, error) {
	block, _ := pem.Decode([]byte(ca.Cert))
	if block == nil {
		return certificate{}, errors.New("unable to decode certificate")
	}
	parent, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return certificate{}, fmt.Errorf("error parsing certificate: decodedSignerCert.Bytes: %w", err)
	}
	caKey, err := parseKeyPEM(ca.Key)
	if err != nil {
		return certificate{}, fmt.Errorf("error parsing private key: %w", err)
	}
	return sign(t, k, parent, caKey)
}

// sign makes the certificate. RSA (PKCS #1 v1.5) and Ed25519 signatures
// are deterministic; an ECDSA key signs by RFC 6979 (no reader given).
func sign(t *x509.Certificate, k crypto.Signer, parent *x509.Certificate, signer crypto.Signer) (certificate, error) {
	der, err := x509.CreateCertificate(nil, t, parent, k.Public(), deterministicSigner{signer})
	if err != nil {
		return certificate{}, fmt.Errorf("error creating certificate: %w", err)
	}
	key, err := pemKey(k)
	if err != nil {
		return certificate{}, err
	}
	return certificate{Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), Key: key}, nil
}

// deterministicSigner signs without a source of randomness: ECDSA by RFC
// 6979.
type deterministicSigner struct{ crypto.Signer }

func (s deterministicSigner) Sign(_ io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.Signer.Sign(nil, digest, opts)
}

// pemKey encodes a key as sprig does: PKCS #1 for RSA, SEC 1 for ECDSA,
// PKCS #8 otherwise.
func pemKey(k crypto.Signer) (string, error) {
	var block *pem.Block
	switch k := k.(type) {
	case *rsa.PrivateKey:
		block = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	case *ecdsa.PrivateKey:
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return "", err
		}
		block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: b}
	default:
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return "", err
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: b}
	}
	return string(pem.EncodeToMemory(block)), nil
}

// parseKeyPEM reads a PEM private key a chart gives (sprig's forms; DSA
// keys are not read: nothing here signs with them).
func parseKeyPEM(s string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("no PEM data in input")
	}
	var k any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("invalid private key type %s", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unable to get public key for type %T", k)
	}
	return signer, nil
}

// buildCustomCert is sprig's, giving this file's certificate type (the
// one the certificate functions here take).
func buildCustomCert(b64cert, b64key string) (certificate, error) {
	cert, err := base64.StdEncoding.DecodeString(b64cert)
	if err != nil {
		return certificate{}, errors.New("unable to decode base64 certificate")
	}
	key, err := base64.StdEncoding.DecodeString(b64key)
	if err != nil {
		return certificate{}, errors.New("unable to decode base64 private key")
	}
	block, _ := pem.Decode(cert)
	if block == nil {
		return certificate{}, errors.New("unable to decode certificate")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return certificate{}, fmt.Errorf("error parsing certificate: decodedCert.Bytes: %w", err)
	}
	if _, err := parseKeyPEM(string(key)); err != nil {
		return certificate{}, fmt.Errorf("error parsing private key: %w", err)
	}
	return certificate{Cert: string(cert), Key: string(key)}, nil
}

// encryptAES is sprig's (AES-256-CBC, PKCS #7 padding, the IV first, in
// base64), its IV drawn from r.
func encryptAES(r *rand.ChaCha8, password, plaintext string) (string, error) {
	key := make([]byte, 32)
	copy(key, password)
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", err
	}
	content := []byte(plaintext)
	pad := block.BlockSize() - len(content)%block.BlockSize()
	content = append(content, bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(content))
	r.Read(out[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], content)
	return base64.StdEncoding.EncodeToString(out), nil
}

// bcryptCost is sprig's (golang.org/x/crypto/bcrypt's default).
const bcryptCost = 10

// bcryptBase64 is bcrypt's alphabet, without padding.
var bcryptBase64 = base64.NewEncoding("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789").WithPadding(base64.NoPadding)

// bcryptHash is bcrypt ($2a$, sprig's cost) with a salt drawn from r: the
// algorithm of Provos and Mazières over Blowfish's expensive key setup
// (golang.org/x/crypto/blowfish). Its salt cannot be given to
// x/crypto/bcrypt, which draws it at random; any bcrypt verifier accepts
// the result.
func bcryptHash(r *rand.ChaCha8, password string) string {
	salt := make([]byte, 16)
	r.Read(salt)
	key := append([]byte(password), 0)
	if len(key) > 72 {
		key = key[:72]
	}
	c, _ := blowfish.NewSaltedCipher(key, salt)
	for i := 0; i < 1<<bcryptCost; i++ {
		blowfish.ExpandKey(key, c)
		blowfish.ExpandKey(salt, c)
	}
	text := []byte("OrpheanBeholderScryDoubt")
	for i := 0; i < len(text); i += 8 {
		for j := 0; j < 64; j++ {
			c.Encrypt(text[i:i+8], text[i:i+8])
		}
	}
	return fmt.Sprintf("$2a$%02d$%s%s", bcryptCost, bcryptBase64.EncodeToString(salt), bcryptBase64.EncodeToString(text[:23]))
}
