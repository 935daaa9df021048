package render

import (
	"crypto/hmac"
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/mask"
)

// Generate makes the values a chart's templates generate (randAlphaNum,
// uuidv4, genPrivateKey, genCA, now...) the same at every render of a
// sync, instead of new at each one as `helm template` makes them: each is
// derived from the sync's key, the template that asks for it (its path in
// the chart, such as "grafana/templates/secret.yaml"), the function and
// its arguments, and how many times that template asked the same before.
// A change to an unrelated template, to the chart's version or to its
// README changes none of them; a password is rotated only when the key (or
// the sync's rotation annotation) is.
type Generate struct {
	// Key is the sync's key: 32 secret bytes, derived for this sync.
	// Without one, values are made at random, as helm makes them, and the
	// templates that made them are listed (Result.Unkeyed): the caller
	// refuses to commit what they gave (a test hook left out needs none).
	Key []byte `json:"key,omitempty"`
	// Now is the time now gives, and generated certificates start at.
	Now time.Time `json:"now"`
}

// ErrUnstable is the error of a template whose output cannot be made the
// same at every render.
var ErrUnstable = errors.New("cannot be made the same at every render")

// enterFunc and leaveFunc are the functions the first and the last
// action of every template call (see markTemplates): the values generated
// between are the template's. Each takes the render's nonce, which no
// template can read, so that a template cannot say it is another and be
// given that one's values.
const (
	enterFunc = "__sluice_enter"
	leaveFunc = "__sluice_leave"
)

// generator makes a render's generated values and records which templates
// asked for them.
type generator struct {
	g *Generate
	// nonce is the render's secret: the argument of enterFunc and
	// leaveFunc.
	nonce string
	// stack holds the templates executing, the innermost last: helm's
	// engine executes one at a time, in order, and a template may include
	// a whole other one (a checksum of its Secret), whose values are that
	// one's until it ends.
	stack   []string
	counts  map[string]int
	used    map[string]map[string]bool
	lookups map[string]bool
	unkeyed map[string]bool
	// values are the secret values generated, registered as they are
	// made, to be masked wherever output is produced (indexed by whoever
	// masks: mask.New).
	values []mask.Value
}

func newGenerator(g *Generate) *generator {
	var nonce [16]byte
	cryptorand.Read(nonce[:])
	return &generator{g: g, nonce: hex.EncodeToString(nonce[:]), counts: map[string]int{}, used: map[string]map[string]bool{},
		lookups: map[string]bool{}, unkeyed: map[string]bool{}}
}

// template is the template executing ("" before the first).
func (gen *generator) template() string {
	if len(gen.stack) == 0 {
		return ""
	}
	return gen.stack[len(gen.stack)-1]
}

// register records a value generated, drawn with bits of entropy.
func (gen *generator) register(fn, text string, bits float64) {
	if bits >= mask.MinBits {
		gen.values = append(gen.values, mask.Value{Text: text, Bits: bits, Origin: fmt.Sprintf("template %s, %s", gen.template(), fn)})
	}
}

// Values are the secret values the render generated.
func (gen *generator) Values() []mask.Value { return gen.values }

// seed is the seed of one call: an HMAC of the call's site under the key.
func (gen *generator) seed(fn string, args ...any) ([32]byte, error) {
	var out [32]byte
	t := gen.template()
	if gen.used[t] == nil {
		gen.used[t] = map[string]bool{}
	}
	gen.used[t][fn] = true
	if len(gen.g.Key) == 0 {
		gen.unkeyed[t] = true
		_, err := cryptorand.Read(out[:])
		return out, err
	}
	var site strings.Builder
	site.WriteString(t)
	site.WriteByte(0)
	site.WriteString(fn)
	for _, a := range args {
		fmt.Fprintf(&site, "\x00%v", a)
	}
	n := gen.counts[site.String()]
	gen.counts[site.String()]++
	m := hmac.New(sha256.New, gen.g.Key)
	m.Write([]byte("sluice generated value v1\x00"))
	m.Write([]byte(site.String()))
	m.Write(binary.BigEndian.AppendUint64([]byte{0}, uint64(n)))
	copy(out[:], m.Sum(nil))
	return out, nil
}

// stream is the deterministic source of one call's random bytes.
func (gen *generator) stream(fn string, args ...any) (*rand.ChaCha8, error) {
	s, err := gen.seed(fn, args...)
	if err != nil {
		return nil, err
	}
	return rand.NewChaCha8(s), nil
}

// now is the generated time: the key's (the clock's without a key).
func (gen *generator) now() (time.Time, error) {
	if _, err := gen.seed("now"); err != nil {
		return time.Time{}, err
	}
	if len(gen.g.Key) == 0 {
		return time.Now(), nil
	}
	return gen.g.Now.UTC(), nil
}

// Generated lists the templates that asked for generated values, and the
// functions each called, NOTES.txt left out (it is not rendered).
func (gen *generator) Generated() []v1alpha1.Generated {
	var out []v1alpha1.Generated
	for t, fns := range gen.used {
		if strings.HasSuffix(t, "NOTES.txt") {
			continue
		}
		g := v1alpha1.Generated{Template: t}
		for fn := range fns {
			g.Functions = append(g.Functions, fn)
		}
		sort.Strings(g.Functions)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Template < out[j].Template })
	return out
}

// Unkeyed lists the templates that generated values without a key.
func (gen *generator) Unkeyed() []string {
	var out []string
	for t := range gen.unkeyed {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Lookups lists the templates that called lookup.
func (gen *generator) Lookups() []string {
	var out []string
	for t := range gen.lookups {
		if !strings.HasSuffix(t, "NOTES.txt") {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Character sets of sprig's rand* functions.
const (
	alphaNum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	alpha    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	numeric  = "0123456789"
)

// ascii is the printable ASCII sprig's randAscii draws from (32 to 126).
var ascii = func() string {
	var b strings.Builder
	for c := byte(32); c <= 126; c++ {
		b.WriteByte(c)
	}
	return b.String()
}()

// pick draws n characters of set, each uniformly (rejection sampling).
func pick(r *rand.ChaCha8, set string, n int) string {
	out := make([]byte, n)
	limit := 256 - 256%len(set)
	var b [1]byte
	for i := 0; i < n; {
		r.Read(b[:])
		if int(b[0]) < limit {
			out[i] = set[int(b[0])%len(set)]
			i++
		}
	}
	return string(out)
}

// funcs are the generating functions, given check to bound lengths as
// the other bounded functions are.
func (gen *generator) funcs(check func(string, int, int) error, maxBytes int) template.FuncMap {
	randString := func(name, set string) func(int) (string, error) {
		return func(n int) (string, error) {
			if err := check(name, n, maxBytes); err != nil {
				return "", err
			}
			if n < 0 {
				n = 0
			}
			r, err := gen.stream(name, n)
			if err != nil {
				return "", err
			}
			out := pick(r, set, n)
			gen.register(name, out, float64(n)*math.Log2(float64(len(set))))
			return out, nil
		}
	}
	m := template.FuncMap{
		enterFunc: func(nonce, name string) (string, error) {
			if nonce != gen.nonce {
				return "", errClaim
			}
			gen.stack = append(gen.stack, name)
			return "", nil
		},
		leaveFunc: func(nonce string) (string, error) {
			if nonce != gen.nonce || len(gen.stack) == 0 {
				return "", errClaim
			}
			gen.stack = gen.stack[:len(gen.stack)-1]
			return "", nil
		},
		"randAlphaNum": randString("randAlphaNum", alphaNum),
		"randAlpha":    randString("randAlpha", alpha),
		"randNumeric":  randString("randNumeric", numeric),
		"randAscii":    randString("randAscii", ascii),
		"randBytes": func(n int) (string, error) {
			if err := check("randBytes", n, maxBytes); err != nil {
				return "", err
			}
			r, err := gen.stream("randBytes", n)
			if err != nil {
				return "", err
			}
			buf := make([]byte, max(n, 0))
			r.Read(buf)
			out := base64.StdEncoding.EncodeToString(buf)
			gen.register("randBytes", string(buf), float64(8*len(buf)))
			gen.register("randBytes", out, float64(8*len(buf)))
			return out, nil
		},
		"randInt": func(lo, hi int) (int, error) {
			if hi <= lo {
				return 0, fmt.Errorf("randInt: %d is not above %d", hi, lo)
			}
			r, err := gen.stream("randInt", lo, hi)
			if err != nil {
				return 0, err
			}
			out := lo + int(rand.New(r).Int64N(int64(hi-lo)))
			gen.register("randInt", strconv.Itoa(out), math.Log2(float64(hi)-float64(lo)))
			return out, nil
		},
		"uuidv4": func() (string, error) {
			r, err := gen.stream("uuidv4")
			if err != nil {
				return "", err
			}
			var u [16]byte
			r.Read(u[:])
			u[6] = u[6]&0x0f | 0x40 // version 4
			u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
			out := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
			gen.register("uuidv4", out, 122)
			gen.register("uuidv4", strings.ReplaceAll(out, "-", ""), 122)
			return out, nil
		},
		"shuffle": func(s string) (string, error) {
			r, err := gen.stream("shuffle", s)
			if err != nil {
				return "", err
			}
			runes := []rune(s)
			rand.New(r).Shuffle(len(runes), func(i, j int) { runes[i], runes[j] = runes[j], runes[i] })
			lg, _ := math.Lgamma(float64(len(runes) + 1))
			gen.register("shuffle", string(runes), lg/math.Ln2)
			return string(runes), nil
		},
		"now": gen.now,
		"lookup": func(apiVersion, kind, namespace, name string) (map[string]any, error) {
			// As `helm template` and a first install: nothing is found.
			gen.lookups[gen.template()] = true
			return map[string]any{}, nil
		},
	}
	for name, f := range gen.timeFuncs() {
		m[name] = f
	}
	for name, f := range gen.cryptoFuncs() {
		m[name] = f
	}
	return m
}

// markTemplates puts a call of enterFunc at the start of every template
// a chart (and its subcharts) renders, named as helm names it
// ("grafana/templates/secret.yaml", "shop/charts/redis/templates/x.yaml"),
// and a call of leaveFunc at its end, so that the values generated
// between are the template's own. Neither gives anything nor adds a
// line: the output, and helm's line numbers in errors, stay as they were.
func markTemplates(ch *chart.Chart, nonce string) {
	name := ch.ChartFullPath()
	for _, t := range ch.Templates {
		if t == nil {
			continue
		}
		base := t.Name[strings.LastIndex(t.Name, "/")+1:]
		if strings.HasPrefix(base, "_") {
			continue // a partial: never executed on its own
		}
		data := make([]byte, 0, len(t.Data)+128)
		data = append(data, "{{ "+enterFunc+" "+strconv.Quote(nonce)+" "+strconv.Quote(name+"/"+t.Name)+" }}"...)
		data = append(data, t.Data...)
		data = append(data, "{{ "+leaveFunc+" "+strconv.Quote(nonce)+" }}"...)
		t.Data = data
	}
	for _, d := range ch.Dependencies() {
		markTemplates(d, nonce)
	}
}

// errClaim is the error of a template that calls enterFunc or leaveFunc
// itself: it would be given another template's values.
var errClaim = errors.New("a template may not say which template it is (" + enterFunc + " and " + leaveFunc + " are Sluice's own)")
