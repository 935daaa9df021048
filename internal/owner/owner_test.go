package owner

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/ProtonMail/go-crypto/openpgp"
	pgparmor "github.com/ProtonMail/go-crypto/openpgp/armor"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// flux makes a Flux from a Kustomization's spec, as YAML.
func flux(t *testing.T, spec string) *Flux {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec:\n"+spec), &u.Object); err != nil {
		t.Fatal(err)
	}
	f, err := fluxOf(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// renderAs renders dir of a tree as f applies it.
func renderAs(t *testing.T, f *Flux, root, dir string) ([]*yaml.RNode, error) {
	t.Helper()
	fsys, err := source.Dir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	res, err := render.Render(context.Background(), fsys, dir, f.Options(render.Options{}))
	if err != nil {
		return nil, err
	}
	return res.Nodes()
}

func field(t *testing.T, objs []*yaml.RNode, kind, name string, path ...string) string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			n, err := o.Pipe(yaml.Lookup(path...))
			if err != nil || n == nil {
				return "<none>"
			}
			return strings.TrimSpace(n.MustString())
		}
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	t.Fatalf("no %s %s among %v", kind, name, names)
	return ""
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/web:1.0}]
`

func TestAMissingComponentOrANonKubernetesFileFailsNamingIt(t *testing.T) {
	root := tree(t, map[string]string{"apps/web.yaml": deployment, "apps/notes.yaml": "just: notes\n"})
	_, err := renderAs(t, flux(t, "  path: ./apps\n  sourceRef: {kind: GitRepository, name: fleet}\n"), root, "apps")
	if err == nil || !strings.Contains(err.Error(), "apps/notes.yaml") || !strings.Contains(err.Error(), "Kustomization flux-system/apps") {
		t.Errorf("err = %v, want one naming apps/notes.yaml and the Kustomization", err)
	}
	root = tree(t, map[string]string{"apps/web.yaml": deployment})
	_, err = renderAs(t, flux(t, "  components: [nope]\n  sourceRef: {kind: GitRepository, name: fleet}\n"), root, "apps")
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("err = %v, want one naming the missing component", err)
	}
}

const plainSecret = `apiVersion: v1
kind: Secret
metadata:
  name: db
type: Opaque
stringData:
  password: s3cret
  port: "5432"
data:
  token: dG9rZW4=
`

func TestSOPSSecretsDecryptAsFluxDecryptsThem(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	enc := testenv.SOPSEncrypt(t, plainSecret, id.Recipient().String(), "^(data|stringData)$")
	if strings.Contains(enc, "s3cret") || !strings.Contains(enc, "ENC[AES256_GCM") {
		t.Fatalf("not encrypted:\n%s", enc)
	}
	decrypt := func(d *decryptor, doc string) (*yaml.RNode, bool, error) {
		n, err := yaml.Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		return d.object(n)
	}
	d := &decryptor{secret: "flux-system/sops-age", age: []age.Identity{other, id}}
	out, ok, err := decrypt(d, enc)
	if err != nil || !ok {
		t.Fatalf("decrypted %v: %v", ok, err)
	}
	want, _ := yaml.Parse(plainSecret)
	if got, w := out.MustString(), want.MustString(); got != w {
		t.Errorf("decrypted:\n%s\nwant:\n%s", got, w)
	}

	// Only the wrong key: the message names the key it needs.
	_, _, err = decrypt(&decryptor{secret: "flux-system/sops-age", age: []age.Identity{other}}, enc)
	if err == nil || !strings.Contains(err.Error(), id.Recipient().String()) || !strings.Contains(err.Error(), "flux-system/sops-age") {
		t.Errorf("err = %v, want one naming the Secret and the recipient", err)
	}
	// A value moved to another key does not decrypt (its path is its
	// additional data).
	moved := strings.Replace(enc, "password:", "passwd:", 1)
	if _, _, err := decrypt(d, moved); err == nil || !strings.Contains(err.Error(), "stringData.passwd") {
		t.Errorf("err = %v, want one naming stringData.passwd", err)
	}
	// An object without sops metadata is left as it is.
	if _, ok, err := decrypt(d, plainSecret); ok || err != nil {
		t.Errorf("a plain Secret: decrypted %v, %v", ok, err)
	}
}

func TestSOPSSecretsEncryptedForAnOpenPGPKeyDecrypt(t *testing.T) {
	entity, err := openpgp.NewEntity("fleet", "", "fleet@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := testenv.SOPSEncryptPGP(t, plainSecret, entity, "^(data|stringData)$")
	var armored bytes.Buffer
	w, err := pgparmor.Encode(&armored, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := entity.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The key as Flux reads it: the armored private key of a *.asc entry.
	keys, err := openpgp.ReadArmoredKeyRing(&armored)
	if err != nil {
		t.Fatal(err)
	}
	n, err := yaml.Parse(enc)
	if err != nil {
		t.Fatal(err)
	}
	out, ok, err := (&decryptor{secret: "flux-system/sops-gpg", pgp: keys}).object(n)
	if err != nil || !ok {
		t.Fatalf("decrypted %v: %v", ok, err)
	}
	want, _ := yaml.Parse(plainSecret)
	if got, w := out.MustString(), want.MustString(); got != w {
		t.Errorf("decrypted:\n%s\nwant:\n%s", got, w)
	}
	if _, _, err := (&decryptor{secret: "flux-system/sops-gpg"}).object(n); err == nil || !strings.Contains(err.Error(), "OpenPGP key "+strings.ToUpper(hex.EncodeToString(entity.PrimaryKey.Fingerprint))) {
		t.Errorf("without the key: %v, want the fingerprint named", err)
	}
}

func TestArgoCDGlobsAndImages(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.yaml", "a.yaml", true},
		{"*.yaml", "sub/a.yaml", true}, // * crosses folders, as Argo CD's globs
		{"{a,b}.yaml", "b.yaml", true},
		{"{sub/not-*,other/*}", "sub/not-this.yaml", true},
		{"{sub/not-*,other/*}", "sub/this.yaml", false},
		{"?.yml", "c.yml", true},
		{"?.yml", "cc.yml", false},
	} {
		if got := globMatch(c.pattern, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
	for arg, want := range map[string]string{
		"nginx:1.25":                       "nginx  1.25 ",
		"nginx=registry.example.com/ngx:2": "nginx registry.example.com/ngx 2 ",
		"web@sha256:abc":                   "web   sha256:abc",
		"localhost:5000/web=mirror/web:v1": "localhost:5000/web mirror/web v1 ",
		"registry.example.com:443/web:1.0": "registry.example.com:443/web  1.0 ",
	} {
		im, err := parseImageArg(arg)
		if err != nil {
			t.Errorf("%s: %v", arg, err)
			continue
		}
		if got := im.Name + " " + im.NewName + " " + im.NewTag + " " + im.Digest; got != want {
			t.Errorf("%s: %q, want %q", arg, got, want)
		}
	}
	if _, err := parseImageArg("nginx"); err == nil {
		t.Error("an image without a tag, digest or new name is refused, as kustomize edit set image refuses it")
	}
}
