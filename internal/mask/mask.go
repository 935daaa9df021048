// Package mask hides secret values in text that leaves Sluice: a
// preview's diff, an error, a log line. A value is registered when it is
// made (a password a chart's template generated from the sync key) and
// masked wherever it shows, as CI systems mask their secrets, in every
// reversible form a template can give it: as it is, reversed, in upper or
// lower case, base64 (at any alignment inside a longer text), base32,
// hex, quoted and escaped for JSON, Go, YAML, URLs and HTML; and any piece
// of those forms that carries enough of the value to matter (a value cut
// in two halves shows neither). A one-way digest of a value (a
// checksum/secret annotation) is not the value, and stays.
package mask

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Token replaces what is masked, as GitHub Actions writes it.
const Token = "***"

// Value is a secret value to mask.
type Value struct {
	// Text is the value.
	Text string `json:"text"`
	// Bits is the entropy it was drawn with (a 40-character randAlphaNum
	// is 238 bits): what a piece of it must carry to be recognized.
	Bits float64 `json:"bits"`
	// Origin says where it was made, for errors ("template
	// grafana/templates/secret.yaml, randAlphaNum"), never the value.
	Origin string `json:"origin"`
}

// The entropy thresholds.
const (
	// MinBits is the least entropy a value needs to be registered:
	// below it (a 3-digit randNumeric) masking would hide every number.
	MinBits = 16
	// PieceBits is the least a piece of a value must carry to be masked
	// on its own.
	PieceBits = 32
	// FindBits is the least a piece must carry for Find, which fails a
	// sync: a chance match must be out of the question.
	FindBits = 44
)

// Set is a set of secret values and the forms they are looked for in.
// The zero Set, and a nil one, mask nothing.
type Set struct {
	values []Value
	texts  map[string]bool
	// byLen holds, for each window length, the forms' windows of that
	// length (lower case), by rolling hash.
	byLen map[int]map[uint64][]window
	lens  []int
	// seen is a filter of the hashes of every window: most positions of
	// a text are ruled out by one bit.
	seen []uint64
}

const filterBits = 1 << 20

func filterBit(h uint64) (int, uint64) {
	b := (h >> 40) % filterBits
	return int(b / 64), 1 << (b % 64)
}

// window is one window of one form of a value.
type window struct {
	text  string
	value int     // index in values
	bits  float64 // the entropy of the window
	whole bool    // the window is the whole form
}

// New returns the set of values (those of at least MinBits).
func New(values ...Value) *Set {
	s := &Set{}
	s.Add(values...)
	return s
}

// Add registers more values.
func (s *Set) Add(values ...Value) {
	for _, v := range values {
		if v.Bits < MinBits || len(v.Text) < 4 || s.texts[v.Text] {
			continue
		}
		if s.texts == nil {
			s.texts = map[string]bool{}
		}
		s.texts[v.Text] = true
		s.values = append(s.values, v)
		s.index(len(s.values)-1, v)
	}
}

// Values are the registered values.
func (s *Set) Values() []Value {
	if s == nil {
		return nil
	}
	return s.values
}

// Empty reports whether the set masks nothing.
func (s *Set) Empty() bool { return s == nil || len(s.values) == 0 }

// Merge returns a set of s's values and o's.
func (s *Set) Merge(o *Set) *Set {
	switch {
	case o.Empty():
		return s
	case s.Empty():
		return o
	}
	return New(append(append([]Value{}, s.values...), o.values...)...)
}

// index adds the windows of every form of v.
func (s *Set) index(i int, v Value) {
	if s.byLen == nil {
		s.byLen = map[int]map[uint64][]window{}
	}
	for _, f := range forms(v.Text) {
		f = lower(f)
		if len(f) < 4 {
			continue
		}
		perChar := math.Min(v.Bits/float64(len(f)), alphabetBits(f))
		n := int(math.Ceil(PieceBits / perChar))
		if n < 4 {
			n = 4
		}
		if n >= len(f) {
			s.add(len(f), window{text: f, value: i, bits: math.Min(v.Bits, perChar*float64(len(f))), whole: true})
			continue
		}
		for j := 0; j+n <= len(f); j++ {
			s.add(n, window{text: f[j : j+n], value: i, bits: perChar * float64(n)})
		}
	}
}

func (s *Set) add(n int, w window) {
	m := s.byLen[n]
	if m == nil {
		m = map[uint64][]window{}
		s.byLen[n] = m
		s.lens = append(s.lens, n)
		sort.Ints(s.lens)
	}
	h := hash(w.text)
	if s.seen == nil {
		s.seen = make([]uint64, filterBits/64)
	}
	i, bit := filterBit(h)
	s.seen[i] |= bit
	for _, e := range m[h] {
		if e.text == w.text {
			return
		}
	}
	m[h] = append(m[h], w)
}

// forms are the reversible forms a template can give a value: sprig's
// and helm's encodings, quoting and escaping, and the value reversed.
func forms(v string) []string {
	out := []string{v, reverse(v), hex.EncodeToString([]byte(v))}
	out = append(out, shifted(v, 3, 4, base64.StdEncoding.EncodeToString)...)
	out = append(out, shifted(v, 3, 4, base64.URLEncoding.EncodeToString)...)
	out = append(out, shifted(v, 5, 8, base32.StdEncoding.EncodeToString)...)
	q := strconv.Quote(v)
	out = append(out, q[1:len(q)-1])
	if j, err := json.Marshal(v); err == nil {
		out = append(out, string(j[1:len(j)-1]))
	}
	out = append(out,
		strings.ReplaceAll(v, "'", "''"),
		url.QueryEscape(v), url.PathEscape(v),
		template.HTMLEscapeString(v), template.JSEscapeString(v),
	)
	seen := map[string]bool{}
	uniq := out[:0]
	for _, f := range out {
		if !seen[f] {
			seen[f] = true
			uniq = append(uniq, f)
		}
	}
	return uniq
}

// shifted is a block encoding (base64: 3 bytes to 4 characters) of v at
// each alignment it can have inside a longer text, each cut to the
// characters that depend on v alone: so that the value is found in the
// encoding of "user:" + v as in its own.
func shifted(v string, in, out int, enc func([]byte) string) []string {
	var forms []string
	for shift := 0; shift < in; shift++ {
		b := append(make([]byte, shift, shift+len(v)), v...)
		e := enc(b)
		start := 0
		if shift > 0 {
			start = out // the first block holds bytes of the text before
		}
		whole := (shift + len(v)) / in * out // blocks the value fills
		if whole <= start {
			continue
		}
		forms = append(forms, e[start:whole])
	}
	return forms
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// lower folds ASCII letters: a value is found in upper case as in lower.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// alphabetBits is the most a character of s can carry: the bits of the
// alphabet its characters are drawn from, case folded.
func alphabetBits(s string) float64 {
	var digits, letters, other bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits = true
		case 'a' <= c && c <= 'z':
			letters = true
		default:
			other = true
		}
	}
	n := 0
	if digits {
		n += 10
	}
	if letters {
		n += 26
	}
	if other {
		n += 33
	}
	return math.Log2(float64(max(n, 2)))
}

// Rabin–Karp rolling hash, modulo 2^64.
const base = 1099511628211

func hash(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = h*base + uint64(s[i])
	}
	return h
}

// span is a range of the text that holds a value, or a piece of one.
type span struct {
	from, to int
	value    int
	// perChar is the entropy each character of a window of a form
	// carries; a run whose decoding holds a value has none, and bits.
	perChar float64
	bits    float64
}

// decodeDepth is how many encodings deep decoded runs are looked into
// (a value base64-encoded twice, or hex of base64, is three forms deep).
const decodeDepth = 3

// spans finds where the text holds a registered form, or a piece of one,
// itself or in the decoding of a run of base64 or hex it holds.
func (s *Set) spans(text string) []span {
	return s.spansAt(text, decodeDepth)
}

func (s *Set) spansAt(text string, depth int) []span {
	if s.Empty() || text == "" {
		return nil
	}
	out := s.direct(text)
	if depth == 0 {
		return out
	}
	for _, r := range encodedRuns(text) {
		best := span{value: -1}
		for _, dec := range r.decodings() {
			for _, sp := range pieces(s.spansAt(dec, depth-1)) {
				if best.value < 0 || sp.bits > best.bits {
					best = span{from: r.from, to: r.to, value: sp.value, bits: sp.bits}
				}
			}
		}
		if best.value >= 0 {
			out = append(out, best)
		}
	}
	return out
}

// run is a run of a text that may be base64 or hex.
type run struct {
	from, to int
	text     string
}

// encodedRuns are the runs of base64's or hex's characters long enough
// to hold a value.
func encodedRuns(text string) []run {
	var out []run
	start := -1
	for i := 0; i <= len(text); i++ {
		if i < len(text) && isBase64Char(text[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start >= 16 {
			out = append(out, run{start, i, text[start:i]})
		}
		start = -1
	}
	return out
}

func isBase64Char(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_' || c == '='
}

// decodings are what the run decodes to as base64 (standard or URL, from
// each of the four characters a value's encoding may start at) and as
// hex.
func (r run) decodings() []string {
	var out []string
	t := strings.TrimRight(r.text, "=")
	for off := 0; off < 4 && off < len(t); off++ {
		body := t[off:]
		if len(body)%4 == 1 {
			body = body[:len(body)-1] // no encoding ends so
		}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(body); err == nil && len(b) >= 8 {
				out = append(out, string(b))
				break
			}
		}
	}
	for off := 0; off < 2 && off < len(r.text); off++ {
		h := r.text[off:]
		h = h[:len(h)/2*2]
		if b, err := hex.DecodeString(h); err == nil && len(b) >= 8 {
			out = append(out, string(b))
		}
	}
	return out
}

// direct finds where the text holds a registered form, or a piece of one.
func (s *Set) direct(text string) []span {
	low := lower(text)
	var out []span
	for _, n := range s.lens {
		if n > len(low) {
			break
		}
		m := s.byLen[n]
		var pow uint64 = 1
		for i := 1; i < n; i++ {
			pow *= base
		}
		h := hash(low[:n])
		for i := 0; ; i++ {
			if k, bit := filterBit(h); s.seen[k]&bit == 0 {
				// not a window of any form
			} else if ws, ok := m[h]; ok {
				for _, w := range ws {
					if low[i:i+n] == w.text {
						out = append(out, span{from: i, to: i + n, value: w.value, perChar: w.bits / float64(n), bits: w.bits})
						break
					}
				}
			}
			if i+n >= len(low) {
				break
			}
			h = (h-uint64(low[i])*pow)*base + uint64(low[i+n])
		}
	}
	return out
}

// String is text with every registered value, and every piece of one
// worth hiding, replaced by Token.
func (s *Set) String(text string) string {
	sp := s.spans(text)
	if len(sp) == 0 {
		return text
	}
	sort.Slice(sp, func(i, j int) bool { return sp[i].from < sp[j].from })
	var b strings.Builder
	at := 0
	for i := 0; i < len(sp); {
		from, to := sp[i].from, sp[i].to
		for i++; i < len(sp) && sp[i].from <= to; i++ {
			to = max(to, sp[i].to)
		}
		b.WriteString(text[at:from])
		b.WriteString(Token)
		at = to
	}
	b.WriteString(text[at:])
	return b.String()
}

// Strings masks each of texts in place, and returns them.
func (s *Set) Strings(texts []string) []string {
	for i, t := range texts {
		texts[i] = s.String(t)
	}
	return texts
}

// pieces merges the overlapping spans of each value into one, of the
// entropy of the most any of them carries, or of the whole merged piece.
func pieces(sp []span) []span {
	sort.Slice(sp, func(i, j int) bool {
		if sp[i].value != sp[j].value {
			return sp[i].value < sp[j].value
		}
		return sp[i].from < sp[j].from
	})
	var out []span
	for i := 0; i < len(sp); {
		cur := sp[i]
		for i++; i < len(sp) && sp[i].value == cur.value && sp[i].from <= cur.to; i++ {
			cur.to = max(cur.to, sp[i].to)
			cur.bits = max(cur.bits, sp[i].bits)
			if cur.perChar > 0 && sp[i].perChar > 0 {
				cur.perChar = math.Min(cur.perChar, sp[i].perChar)
				cur.bits = max(cur.bits, cur.perChar*float64(cur.to-cur.from))
			}
		}
		out = append(out, cur)
	}
	return out
}

// Find reports the value text holds, whole or in a piece of at least
// FindBits, and where it was made; ok is false when it holds none.
func (s *Set) Find(text string) (v Value, ok bool) {
	for _, p := range pieces(s.spans(text)) {
		if p.bits >= FindBits {
			return s.values[p.value], true
		}
	}
	return Value{}, false
}

// Error returns err with every registered value masked in its message;
// errors.Is and errors.As still see what err wraps. nil stays nil.
func (s *Set) Error(err error) error {
	if err == nil || s.Empty() {
		return err
	}
	msg := err.Error()
	if m := s.String(msg); m != msg {
		return &masked{msg: m, err: err}
	}
	return err
}

type masked struct {
	msg string
	err error
}

func (e *masked) Error() string { return e.msg }

// Is and As reach what the error wraps without Unwrap, through which a
// caller could print the message unmasked.
func (e *masked) Is(target error) bool { return errors.Is(e.err, target) }
func (e *masked) As(target any) bool   { return errors.As(e.err, target) }
