package render

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// testKey is a sync key of the tests' own.
var testKey = &Generate{Key: []byte("0123456789abcdef0123456789abcdef"), Now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}

func renderGenerated(t *testing.T, root, chart string, g *Generate) (*Result, error) {
	t.Helper()
	fsys, err := source.Dir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	return Render(context.Background(), fsys, chart, Options{
		Render:   &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ReleaseName: "gen", Namespace: "default"}},
		Generate: g,
	})
}

// data reads a Secret's or ConfigMap's value (a Secret's decoded).
func data(t *testing.T, objs []*yaml.RNode, name, key string) string {
	t.Helper()
	for _, o := range objs {
		if o.GetName() != name {
			continue
		}
		v, err := o.Pipe(yaml.Lookup("data", key))
		if err != nil || v == nil {
			t.Fatalf("%s has no data.%s", name, key)
		}
		s := yaml.GetValue(v)
		if o.GetKind() == "Secret" {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("%s data.%s: %v", name, key, err)
			}
			s = string(b)
		}
		return s
	}
	t.Fatalf("no object %s", name)
	return ""
}

// The chart's generated values are new at each run of the helm release
// binary (the fixture really generates), and the same at each render
// with one key; another key gives others. Everything else is what helm
// renders.
func TestGeneratedValuesAreTheSameAtEveryRender(t *testing.T) {
	bin := testenv.HelmBinary(t)
	args := helmCase{chart: "generated", release: "gen", namespace: "default"}.args(t)
	var helmRuns [][]*yaml.RNode
	for range 2 {
		out, err := runHelm(t, bin, args...)
		if err != nil {
			t.Fatalf("helm: %v", err)
		}
		objs, err := kio.FromBytes(out)
		if err != nil {
			t.Fatal(err)
		}
		helmRuns = append(helmRuns, objs)
	}
	render := func(g *Generate) []*yaml.RNode {
		res, err := renderGenerated(t, "testdata/charts", "generated", g)
		if err != nil {
			t.Fatal(err)
		}
		return objects(t, res)
	}
	first, second := render(testKey), render(testKey)
	other := render(&Generate{Key: []byte("another key, 32 bytes long......"), Now: testKey.Now})
	if len(first) != len(helmRuns[0]) {
		t.Fatalf("sluice renders %d objects, helm %d", len(first), len(helmRuns[0]))
	}
	random := 0
	for i := range first {
		paths := differingPaths(t, helmRuns[0][i], helmRuns[1][i])
		random += len(paths)
		if g, w := masked(t, first[i], paths), masked(t, helmRuns[0][i], paths); g != w {
			t.Errorf("object %d differs from helm's beyond its generated values:\n--- sluice\n%s\n--- helm\n%s", i, g, w)
		}
		if a, b := first[i].MustString(), second[i].MustString(); a != b {
			t.Errorf("object %d changed between two renders with one key:\n%s\n---\n%s", i, a, b)
		}
		for p := range paths {
			if len(differingPaths(t, first[i], other[i])) == 0 {
				t.Errorf("object %d: %s is the same with another key", i, p)
			}
		}
	}
	// The fixture's every generating call shows in helm's own runs: 13
	// secret values, 5 certificate values and the checksum of one, the
	// time, the id, the port and the shuffle (a shuffle of 8 letters, or a
	// port among 2,000, may come out the same twice: at least 20).
	if random < 20 {
		t.Fatalf("only %d paths differ between two helm runs: the fixture does not generate what it should", random)
	}
	if a, b := data(t, first, "gen-passwords", "admin"), data(t, first, "gen-passwords", "second"); a == b || len(a) != 40 {
		t.Errorf("two calls in one template gave %q and %q", a, b)
	}
}

// What the generated values are: sprig's forms, and valid as what they
// claim to be (a bcrypt hash verifies, a certificate chains to its CA and
// starts at the key's time, a key parses).
func TestGeneratedValuesAreWhatSprigMakes(t *testing.T) {
	res, err := renderGenerated(t, "testdata/charts", "generated", testKey)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, res)
	for key, re := range map[string]string{
		"admin": `^[A-Za-z0-9]{40}$`, "alpha": `^[A-Za-z]{12}$`, "numeric": `^[0-9]{6}$`, "ascii": `^[ -~]{20}$`,
		"alice": `^[A-Za-z0-9]{16}$`, "htpasswd": `^admin:\$2a\$10\$[./A-Za-z0-9]{53}$`,
	} {
		if v := data(t, objs, "gen-passwords", key); !regexp.MustCompile(re).MatchString(v) {
			t.Errorf("data.%s = %q, not %s", key, v, re)
		}
	}
	if b, err := base64.StdEncoding.DecodeString(data(t, objs, "gen-passwords", "bytes")); err != nil || len(b) != 24 {
		t.Errorf("randBytes 24: %d bytes, %v", len(b), err)
	}
	for _, h := range []string{data(t, objs, "gen-passwords", "bcrypt"), strings.TrimPrefix(data(t, objs, "gen-passwords", "htpasswd"), "admin:")} {
		if err := bcrypt.CompareHashAndPassword([]byte(h), []byte("secret")); err != nil {
			t.Errorf("bcrypt hash %s does not verify: %v", h, err)
		}
		if bcrypt.CompareHashAndPassword([]byte(h), []byte("secreT")) == nil {
			t.Errorf("bcrypt hash %s verifies another password", h)
		}
	}
	if id := data(t, objs, "gen-ids", "id"); !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Errorf("uuidv4 gave %q", id)
	}
	cert := func(key string) *x509.Certificate {
		block, _ := pem.Decode([]byte(data(t, objs, "gen-tls", key)))
		if block == nil {
			t.Fatalf("%s is not PEM", key)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return c
	}
	ca, leaf := cert("ca.crt"), cert("tls.crt")
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "web.example", CurrentTime: testKey.Now.Add(time.Hour)}); err != nil {
		t.Errorf("the signed certificate does not chain to the CA: %v", err)
	}
	if !leaf.NotBefore.Equal(testKey.Now) || !leaf.NotAfter.Equal(testKey.Now.Add(90*24*time.Hour)) {
		t.Errorf("the certificate is valid from %s to %s, not from the key's time for 90 days", leaf.NotBefore, leaf.NotAfter)
	}
	if !ca.IsCA || ca.Subject.CommonName != "generated-ca" {
		t.Errorf("the CA is %+v", ca.Subject)
	}
	for _, k := range []string{"tls.key", "ec.key", "ed.key"} {
		block, _ := pem.Decode([]byte(data(t, objs, "gen-tls", k)))
		if block == nil {
			t.Fatalf("%s is not PEM", k)
		}
		var err error
		switch block.Type {
		case "RSA PRIVATE KEY":
			_, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			_, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			t.Errorf("%s (%s): %v", k, block.Type, err)
		}
	}
	got := map[string]string{}
	for _, g := range res.Generated {
		got[g.Template] = strings.Join(g.Functions, ",")
	}
	want := map[string]string{
		"generated/templates/certs.yaml":     "genCA,genPrivateKey,genSelfSignedCert,genSignedCert,now",
		"generated/templates/configmap.yaml": "now,randInt,shuffle,uuidv4",
		"generated/templates/secret.yaml":    "bcrypt,encryptAES,htpasswd,randAlpha,randAlphaNum,randAscii,randBytes,randNumeric",
	}
	if len(got) != len(want) {
		t.Errorf("generated: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s generated with %q, want %q", k, got[k], v)
		}
	}
	if strings.Join(res.Lookups, ",") != "generated/templates/configmap.yaml" {
		t.Errorf("lookups: %v", res.Lookups)
	}
}

// A template added before another (or a value added to another's loop
// after its calls) changes none of the other's values: each template's
// values are its own.
func TestAGeneratedValueBelongsToItsTemplate(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "generated"), os.DirFS("testdata/charts/generated")); err != nil {
		t.Fatal(err)
	}
	before, err := renderGenerated(t, root, "generated", testKey)
	if err != nil {
		t.Fatal(err)
	}
	early := "apiVersion: v1\nkind: Secret\nmetadata: {name: early}\ndata:\n  p: {{ randAlphaNum 40 | b64enc }}\n  q: {{ randAlphaNum 16 | b64enc }}\n"
	// helm executes a folder's templates in reverse order of their names:
	// this one first.
	if err := os.WriteFile(filepath.Join(root, "generated/templates/zz-early.yaml"), []byte(early), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "generated/values.yaml"), []byte("users: [alice, bob, carol]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := renderGenerated(t, root, "generated", testKey)
	if err != nil {
		t.Fatal(err)
	}
	b, a := objects(t, before), objects(t, after)
	for _, key := range []string{"admin", "second", "alice", "bob", "htpasswd"} {
		if x, y := data(t, b, "gen-passwords", key), data(t, a, "gen-passwords", key); x != y {
			t.Errorf("data.%s changed from %q to %q", key, x, y)
		}
	}
	if data(t, a, "early", "p") == data(t, a, "gen-passwords", "admin") {
		t.Error("two templates' first randAlphaNum 40 are the same value")
	}
}

// Without a key, values are made at random, as helm makes them, and the
// templates that made them are named, for the caller to refuse what they
// gave; a chart that generates nothing names none.
func TestWithoutAKeyTheTemplatesThatGenerateAreNamed(t *testing.T) {
	res, err := renderGenerated(t, "testdata/charts", "generated", &Generate{})
	if err != nil {
		t.Fatal(err)
	}
	want := "generated/templates/certs.yaml,generated/templates/configmap.yaml,generated/templates/secret.yaml"
	if got := strings.Join(res.Unkeyed, ","); got != want {
		t.Errorf("unkeyed: %s, want %s", got, want)
	}
	keyed, err := renderGenerated(t, "testdata/charts", "generated", testKey)
	if err != nil || len(keyed.Unkeyed) != 0 {
		t.Errorf("with a key: %v, unkeyed %v", err, keyed.Unkeyed)
	}
	res, err = renderGenerated(t, "testdata/charts", "capabilities", &Generate{})
	if err != nil || len(res.Unkeyed)+len(res.Generated) != 0 {
		t.Errorf("a chart that generates nothing: %v, %v %v", err, res.Unkeyed, res.Generated)
	}
}

// DSA keys cannot be made from a seed (Go makes their parameters at
// random): the template fails, naming itself.
func TestAKeyThatCannotBeStableFails(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"dsa/Chart.yaml":         "apiVersion: v2\nname: dsa\nversion: 0.1.0\n",
		"dsa/templates/key.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: k}\nstringData:\n  key: {{ genPrivateKey \"dsa\" | quote }}\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := renderGenerated(t, root, "dsa", testKey)
	if !errors.Is(err, ErrUnstable) && (err == nil || !strings.Contains(err.Error(), ErrUnstable.Error())) {
		t.Fatalf("err = %v, want %v", err, ErrUnstable)
	}
	if !strings.Contains(err.Error(), "dsa/templates/key.yaml") {
		t.Errorf("error %q does not name the template", err)
	}
}
