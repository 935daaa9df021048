package mask

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// randomString draws n characters of set, as sprig's rand* functions.
func randomString(t testing.TB, set string, n int) string {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(set))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = set[k.Int64()]
	}
	return string(b)
}

const alphaNum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// ascii is randAscii's alphabet: quotes, backslashes and all.
var ascii = func() string {
	var b strings.Builder
	for c := byte(32); c <= 126; c++ {
		b.WriteByte(c)
	}
	return b.String()
}()

func value(text, set string) Value {
	return Value{Text: text, Bits: float64(len(text)) * math.Log2(float64(len(set))), Origin: "test"}
}

// Every form a template can give a value is masked, and found.
func TestEveryFormOfAValueIsMasked(t *testing.T) {
	pw := randomString(t, alphaNum, 40)
	odd := randomString(t, ascii, 32) + `"\'<&>` // every character JSON, Go and YAML escape
	b64 := base64.StdEncoding.EncodeToString
	half := len(pw) / 2
	tests := []struct {
		name, value, text string
	}{
		{"as it is", pw, "password=" + pw},
		{"upper case", pw, strings.ToUpper(pw)},
		{"lower case", pw, strings.ToLower(pw)},
		{"reversed", pw, reverseBytes(pw)},
		{"base64", pw, b64([]byte(pw))},
		{"base64 url", pw, base64.URLEncoding.EncodeToString([]byte(pw))},
		{"base64 after a prefix (basic auth)", pw, b64([]byte("admin:" + pw))},
		{"base64 after a one-byte prefix", pw, b64([]byte("a" + pw))},
		{"base64 of base64's prefix", pw, "x" + b64([]byte("xx"+pw+"yy"))},
		{"base32", pw, base32.StdEncoding.EncodeToString([]byte("ab" + pw))},
		{"hex", pw, hex.EncodeToString([]byte(pw))},
		{"base64 twice", pw, b64([]byte(b64([]byte(pw))))},
		{"base64 three times, after a prefix", pw, b64([]byte("k=" + b64([]byte(b64([]byte(pw))))))},
		{"hex of base64", pw, hex.EncodeToString([]byte(b64([]byte(pw))))},
		{"hex, upper case", pw, strings.ToUpper(hex.EncodeToString([]byte(pw)))},
		{"the first half", pw, "a: " + pw[:half]},
		{"the second half", pw, "b: " + pw[half:]},
		{"cut in two fields", pw, "a: " + pw[:half] + "\nb: " + pw[half:]},
		{"a piece of twelve", pw, "x" + pw[13:25] + "y"},
		{"JSON-escaped", odd, mustJSON(odd)},
		{"Go-quoted", odd, strconv.Quote(odd)},
		{"YAML single-quoted", odd, "'" + strings.ReplaceAll(odd, "'", "''") + "'"},
		{"URL-escaped", odd, "https://x/?p=" + url.QueryEscape(odd)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := ""
			if tt.value == odd {
				set = ascii
			} else {
				set = alphaNum
			}
			s := New(value(tt.value, set))
			got := s.String(tt.text)
			if !strings.Contains(got, Token) {
				t.Fatalf("not masked: %q", got)
			}
			low := strings.ToLower(got)
			for i := 0; i+12 <= len(tt.value); i++ {
				if strings.Contains(low, strings.ToLower(tt.value[i:i+12])) {
					t.Errorf("%q shows through: %q", tt.value[i:i+12], got)
					break
				}
			}
			if _, ok := s.Find(tt.text); !ok {
				t.Errorf("Find does not see it in %q", tt.text)
			}
		})
	}
}

// A digest of a value is not the value, a short piece says too little
// of it, and text that holds neither is left as it is.
func TestWhatIsNotAValueStays(t *testing.T) {
	pw := randomString(t, alphaNum, 40)
	sum := sha256.Sum256([]byte(pw))
	s := New(value(pw, alphaNum))
	for _, text := range []string{
		"checksum/secret: " + hex.EncodeToString(sum[:]),
		"a piece of five: " + pw[3:8],
		"image: nginx:1.27@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	} {
		if got := s.String(text); got != text {
			t.Errorf("%q became %q", text, got)
		}
		if v, ok := s.Find(text); ok {
			t.Errorf("Find saw %s in %q", v.Origin, text)
		}
	}
}

// Masking leaves alone every file of the public charts the tests vendor,
// with a hundred values registered: what it hides is what it was told.
func TestMaskingLeavesOrdinaryTextAlone(t *testing.T) {
	var values []Value
	for i := 0; i < 100; i++ {
		values = append(values, value(randomString(t, alphaNum, 8+i%40), alphaNum))
	}
	values = append(values, value(randomString(t, "0123456789", 10), "0123456789"))
	s := New(values...)
	root := filepath.Join("..", "render", "testdata", "charts")
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if got := s.String(string(data)); got != string(data) {
			t.Errorf("%s was changed by masking", p)
		}
		return nil
	})
	if err != nil || n < 100 {
		t.Fatalf("read %d files: %v", n, err)
	}
}

// Values too weak to mask are not registered: masking three digits
// would hide every number.
func TestWeakValuesAreNotRegistered(t *testing.T) {
	s := New(Value{Text: "123", Bits: 10}, Value{Text: "4567", Bits: 13})
	if !s.Empty() {
		t.Errorf("registered %v", s.Values())
	}
	if got := s.String("port 1234567"); got != "port 1234567" {
		t.Errorf("masked %q", got)
	}
}

// An error is masked, and still is what it wraps.
func TestAnErrorIsMaskedAndStillWhatItWraps(t *testing.T) {
	pw := randomString(t, alphaNum, 32)
	sentinel := errors.New("the sentinel")
	err := fmt.Errorf("template: x.yaml:3: fail: the password is %s: %w", pw, sentinel)
	got := New(value(pw, alphaNum)).Error(err)
	if strings.Contains(got.Error(), pw) || !strings.Contains(got.Error(), Token) {
		t.Errorf("error: %v", got)
	}
	if !errors.Is(got, sentinel) {
		t.Error("errors.Is no longer sees the sentinel")
	}
	if errors.Unwrap(got) != nil {
		t.Error("Unwrap gives the unmasked error")
	}
	var nilSet *Set
	if nilSet.Error(err) != err || nilSet.String("x") != "x" {
		t.Error("a nil set changes what it is given")
	}
}

func reverseBytes(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func BenchmarkMaskingAMegabyte(b *testing.B) {
	var values []Value
	for i := 0; i < 50; i++ {
		values = append(values, value(randomString(b, alphaNum, 16+i%32), alphaNum))
	}
	s := New(values...)
	text := strings.Repeat("  image: registry.example.com/team/web:1.0\n  name: web-abcdef\n", 1<<20/64)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		s.String(text)
	}
}
