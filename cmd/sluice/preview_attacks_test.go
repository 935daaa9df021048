package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/synckey"
	"sluice.dev/sluice/internal/testenv"
)

// attackFixture is a source repository of grafana as published (hydrated
// for Flux, its Secrets SOPS-encrypted for an age recipient, its values
// generated from a sync key), a plain folder and a kustomization, all
// hydrated from main; and what a branch pusher can do to it.
type attackFixture struct {
	srv      *testenv.GitServer
	srcURL   string
	dstURL   string
	syncs    string // the syncs' directory
	allow    string // a file of one more grafana sync, allowing generated values outside Secrets
	keyFile  string
	cache    string
	id       *age.X25519Identity
	password string // grafana's admin password on main, as the real sops decrypts it
}

const attackSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %[1]s}
spec:
  source: {repo: %[2]s, ref: main, path: %[3]s}
%[6]s  destination:
    repo: %[4]s
    branch: env/dev
    path: apps/%[1]s
    sops: {age: [%[5]s]}
`

func newAttackFixture(t *testing.T) *attackFixture {
	t.Helper()
	f := &attackFixture{srv: testenv.NewGitServer(t), cache: t.TempDir(), syncs: t.TempDir()}
	f.srcURL, f.dstURL = f.srv.CreateRepo(t, "src"), f.srv.CreateRepo(t, "deploy")
	w := testenv.NewWork(t, f.srcURL)
	w.CopyChart(t, "grafana", "charts/grafana")
	w.Write(map[string]string{
		"plain/cm.yaml":           "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: apps}\ndata: {a: b}\n",
		"plain/secret.yaml":       "apiVersion: v1\nkind: Secret\nmetadata: {name: target, namespace: apps}\nstringData: {a: hunter2-guess-target}\n",
		"kust/kustomization.yaml": "namespace: apps\nresources: [cm.yaml]\n",
		"kust/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kust}\ndata: {a: b}\n",
		"README.md":               "# sources\n",
	}).Commit("sources")
	w.Push("main")
	var err error
	if f.id, err = age.GenerateX25519Identity(); err != nil {
		t.Fatal(err)
	}
	f.keyFile = filepath.Join(t.TempDir(), "sync.key")
	if err := os.WriteFile(f.keyFile, []byte(synckey.New().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	grafana := "  render:\n    helm: {releaseName: grafana, namespace: monitoring}\n"
	for name, path := range map[string]string{"grafana": "charts/grafana", "plain": "plain", "kust": "kust"} {
		render := ""
		if name == "grafana" {
			render = grafana
		}
		y := fmt.Sprintf(attackSync, name, f.srcURL, path, f.dstURL, f.id.Recipient(), render)
		if err := os.WriteFile(filepath.Join(f.syncs, name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.allow = filepath.Join(t.TempDir(), "allow.yaml")
	y := fmt.Sprintf(attackSync, "grafana-allow", f.srcURL, "charts/grafana", f.dstURL, f.id.Recipient(),
		"  render:\n    helm: {releaseName: grafana, namespace: monitoring, generatedValuesOutsideSecrets: true}\n")
	if err := os.WriteFile(f.allow, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := run(t, "hydrate", "-f", f.syncs, "-f", f.allow, "--cache-dir", f.cache, "--sync-key", f.keyFile); code != 0 {
		t.Fatalf("hydrating main: exit %d\n%s%s", code, out, errs)
	}
	// The admin password main's Secret holds, decrypted by the real sops.
	secret := f.file(t, "env/dev", "apps/grafana/secret-grafana.yaml")
	m := f.sopsDecrypt(t, secret)
	data, _ := m["data"].(map[string]any)
	pw, err := base64.StdEncoding.DecodeString(fmt.Sprint(data["admin-password"]))
	if err != nil || len(pw) != 40 {
		t.Fatalf("main's Secret decrypts to %v", m)
	}
	f.password = string(pw)
	return f
}

// file reads a file of the deploy repository's branch.
func (f *attackFixture) file(t *testing.T, branch, path string) string {
	t.Helper()
	return testenv.Git(t, filepath.Join(f.srv.Root, "deploy.git"), "show", branch+":"+path)
}

func (f *attackFixture) sopsDecrypt(t *testing.T, doc string) map[string]any {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.SOPSBinary(t), "decrypt", "--output-type", "json", p)
	cmd.Env = []string{"SOPS_AGE_KEY=" + f.id.String(), "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops decrypt: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// branch pushes a branch of main with the files changed.
func (f *attackFixture) branch(t *testing.T, name string, files map[string]string) {
	t.Helper()
	w := testenv.NewWork(t, f.srcURL)
	testenv.Git(t, w.Dir, "fetch", "-q", "origin", "main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", name, "FETCH_HEAD")
	add := map[string]string{}
	for p, text := range files {
		if strings.HasPrefix(text, "+") {
			old, err := os.ReadFile(filepath.Join(w.Dir, filepath.FromSlash(p)))
			if err != nil {
				t.Fatal(err)
			}
			text = string(old) + text[1:]
		}
		add[p] = text
	}
	w.Write(add).Commit(name)
	w.Push(name)
}

// attack is what a branch pusher tries, and what Sluice must do of it.
type attack struct {
	name  string
	files map[string]string // a text starting with + is appended
	// refused, when set, are the words the failing render's error must
	// say (the object, field and template); else the preview must show
	// the change with nothing secret in it.
	refused []string
	// plaintext are values of the branch's own Secrets, never to show
	// in a preview nor reach git readable.
	plaintext []string
	// commit hydrates the branch too, and reads what git holds.
	commit bool
	// allow previews with the sync that allows generated values outside
	// Secrets (then they are masked); limit cuts the comment.
	allow bool
	limit int
	// check looks at the preview's Markdown further.
	check func(t *testing.T, markdown string)
}

// gpw is grafana's admin password, as its own helper makes it.
const gpw = `include "grafana.password" . | trimAll "\"" | b64dec`

func cm(name, body string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata:\n" + body
}

func attacks() []attack {
	return []attack{
		{name: "the naming function, as it was", files: map[string]string{"charts/grafana/templates/z-leak.yaml": `{{- __sluice_template "grafana/templates/secret.yaml" }}` + "\n" + cm("leak", "  password: {{ "+gpw+" }}\n")},
			refused: []string{"grafana/templates/z-leak.yaml"}},
		{name: "the naming function, nonce guessed", files: map[string]string{"charts/grafana/templates/z-leak.yaml": `{{- __sluice_enter "0123456789abcdef0123456789abcdef" "grafana/templates/secret.yaml" }}` + "\n" + cm("leak", "  password: {{ "+gpw+" }}\n")},
			refused: []string{"grafana/templates/z-leak.yaml", "may not say which template it is"}},
		{name: "include the password helper", files: map[string]string{"charts/grafana/templates/z-leak.yaml": cm("leak", "  password: {{ "+gpw+" }}\n")},
			refused: []string{"ConfigMap/monitoring/leak", "grafana/templates/z-leak.yaml", "data.password"}},
		{name: "include secret.yaml whole, rendered before it", files: map[string]string{"charts/grafana/templates/z-leak.yaml": cm("leak", "  whole: {{ include \"grafana/templates/secret.yaml\" . | quote }}\n")},
			refused: []string{"ConfigMap/monitoring/leak", "data.whole"}},
		{name: "fail", files: map[string]string{"charts/grafana/templates/f.yaml": "{{ fail (" + gpw + ") }}\n"},
			refused: []string{"grafana/templates/f.yaml", mask.Token}},
		{name: "required", files: map[string]string{"charts/grafana/templates/f.yaml": "{{ required (printf \"not %s\" (" + gpw + ")) .Values.nothing }}\n"},
			refused: []string{"grafana/templates/f.yaml", mask.Token}},
		{name: "tpl on values", files: map[string]string{
			"charts/grafana/values.yaml":           "+\nleakTpl: '{{ include \"grafana.password\" . }}'\n",
			"charts/grafana/templates/t-leak.yaml": cm("leak", "  v: {{ tpl .Values.leakTpl . | quote }}\n")},
			refused: []string{"ConfigMap/monitoring/leak", "data.v"}},
		{name: "an annotation", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\n  annotations: {pw: {{ " + gpw + " | quote }}}\n"},
			refused: []string{"metadata.annotations.pw"}},
		{name: "a label", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\n  labels: {pw: {{ " + gpw + " | quote }}}\n"},
			refused: []string{"metadata.labels.pw"}},
		{name: "a name", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak-{{ " + gpw + " | lower }}\n"},
			refused: []string{"metadata.name"}},
		{name: "encoded: hex, base64 twice, reversed", files: map[string]string{"charts/grafana/templates/z-leak.yaml": cm("leak",
			"  hex: {{ printf \"%x\" ("+gpw+") }}\n  twice: {{ "+gpw+" | b64enc | b64enc }}\n  reversed: {{ splitList \"\" ("+gpw+") | reverse | join \"\" | quote }}\n")},
			refused: []string{"ConfigMap/monitoring/leak", "data.hex"}},
		{name: "split across two fields", files: map[string]string{"charts/grafana/templates/z-leak.yaml": cm("leak",
			"  one: {{ "+gpw+" | substr 0 20 | quote }}\n  two: {{ "+gpw+" | substr 20 40 | quote }}\n")},
			refused: []string{"ConfigMap/monitoring/leak", "data.one"}},
		{name: "toYaml .Values after a template set one", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "{{- $_ := set .Values \"stolen\" (" + gpw + ") }}\n" + cm("leak", "  values: {{ toYaml .Values | quote }}\n")},
			refused: []string{"ConfigMap/monitoring/leak", "data.values"}},
		{name: "a SealedSecret holding a generated value", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "apiVersion: bitnami.com/v1alpha1\nkind: SealedSecret\nmetadata: {name: leak}\nspec:\n  encryptedData: {pw: {{ " + gpw + " | b64enc }}}\n"},
			refused: []string{"SealedSecret/monitoring/leak", "spec.encryptedData.pw"}},
		{name: "a look-alike kind (Cyrillic е) holding a generated value", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "apiVersion: v1\nkind: Sеcret\nmetadata: {name: leak}\nstringData: {pw: {{ " + gpw + " | quote }}}\n"},
			refused: []string{"Sеcret/monitoring/leak", "stringData.pw"}},
		{name: "a hook Job given the password", files: map[string]string{"charts/grafana/templates/z-leak.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: leak\n  annotations: {helm.sh/hook: pre-install}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox, env: [{name: PW, value: {{ " + gpw + " | quote }}}]}]\n"},
			refused: []string{"Job/monitoring/leak", "spec.template.spec.containers[0].env[0].value"}},
		{name: "lookup of main's Secret", files: map[string]string{"charts/grafana/templates/z-leak.yaml": cm("leak", "  got: {{ (lookup \"v1\" \"Secret\" \"monitoring\" \"grafana\").data | toJson | quote }}\n")}},
		{name: "a Secret in a hook", files: map[string]string{"charts/grafana/templates/e-hook.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hooked\n  annotations: {helm.sh/hook: pre-install}\nstringData: {pw: hunter2-in-a-hook}\n"},
			plaintext: []string{"hunter2-in-a-hook"}, commit: true},
		{name: "a Secret in a List in a List", files: map[string]string{"plain/lists.yaml": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {apiVersion: v1, kind: Secret, metadata: {name: deep, namespace: apps}, stringData: {pw: hunter2-nested-list}}\n"},
			plaintext: []string{"hunter2-nested-list"}, commit: true},
		{name: "a Secret with an empty sops field", files: map[string]string{"plain/s.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: fake, namespace: apps}\nstringData: {pw: hunter2-empty-sops}\nsops: {}\n"},
			plaintext: []string{"hunter2-empty-sops"}, commit: true},
		{name: "a Secret spelled apiVersion /v1", files: map[string]string{"plain/s.yaml": "apiVersion: /v1\nkind: Secret\nmetadata: {name: slash, namespace: apps}\nstringData: {pw: hunter2-slash-v1}\n"},
			plaintext: []string{"hunter2-slash-v1"}, commit: true},
		{name: "a Secret whose kind is !!binary", files: map[string]string{"plain/s.yaml": "apiVersion: v1\nkind: !!binary U2VjcmV0\nmetadata: {name: binary, namespace: apps}\nstringData: {pw: hunter2-binary-kind}\n"},
			plaintext: []string{"hunter2-binary-kind"}, commit: true},
		{name: "a Secret named in look-alike letters", files: map[string]string{"plain/s.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: tаrget, namespace: apps}\nstringData: {a: hunter2-lookalike}\n"},
			refused: []string{`Secret "apps/t\u0430rget"`, "metadata.name"}, plaintext: []string{"hunter2-lookalike"}},
		{name: "a kustomize secretGenerator from a file", files: map[string]string{"kust/kustomization.yaml": "namespace: apps\nresources: [cm.yaml]\nsecretGenerator:\n- name: gen\n  files: [pw.txt]\n", "kust/pw.txt": "hunter2-from-a-file"},
			plaintext: []string{"hunter2-from-a-file", base64.StdEncoding.EncodeToString([]byte("hunter2-from-a-file"))}, commit: true},
		{name: "guesses compared with a Secret's value", files: map[string]string{"plain/guess.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: right, namespace: apps}\nstringData: {a: hunter2-guess-target}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: wrong, namespace: apps}\nstringData: {a: hunter2-guess-wrong}\n"},
			plaintext: []string{"hunter2-guess"}, check: func(t *testing.T, md string) {
				if regexp.MustCompile(`[0-9a-f]{12}`).MatchString(secretLines(md)) {
					t.Errorf("a Secret's value shows as a digest:\n%s", secretLines(md))
				}
				if strings.Count(md, "+  a: <added>") != 2 {
					t.Errorf("the right guess and the wrong one do not show alike:\n%s", md)
				}
			}},
		{name: "allowed outside Secrets: masked", allow: true, files: map[string]string{
			"charts/grafana/templates/z-leak.yaml": cm("leak", "  password: {{ "+gpw+" }}\n  b64: {{ "+gpw+" | b64enc }}\n")}},
		{name: "a value cut at the limit of an error", limit: 3000, files: map[string]string{
			"charts/grafana/templates/f.yaml": "{{ fail (printf \"%s%s\" (repeat 560 \"x\") (" + gpw + ")) }}\n"},
			refused: []string{"grafana/templates/f.yaml", mask.Token}},
	}
}

// secretLines are the lines of a diff that show a Secret's values.
func secretLines(md string) string {
	var out []string
	for _, l := range strings.Split(md, "\n") {
		if strings.Contains(l, "<hidden") || strings.Contains(l, "<added") || strings.Contains(l, "<changed") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// What a branch pusher can make a preview show, or commit: each attack
// previewed by `sluice preview` with the sync key (Markdown and JSON,
// stdout and stderr), and those about Secrets hydrated: nothing shows
// the admin password main's Secret holds (in any form the masking
// knows), nor a Secret's value, nor reaches git readable; the attacks on
// generated values are refused, naming the object, field and template.
func TestABranchPusherCannotReadSecretsThroughAPreview(t *testing.T) {
	f := newAttackFixture(t)
	secret := mask.New(mask.Value{Text: f.password, Bits: 238, Origin: "main's admin password"})
	for i, a := range attacks() {
		t.Run(a.name, func(t *testing.T) {
			branch := fmt.Sprintf("attack-%d", i)
			f.branch(t, branch, a.files)
			files := []string{"-f", f.syncs}
			if a.allow {
				files = []string{"-f", f.allow}
			}
			args := append([]string{"preview", "--cache-dir", f.cache, "--sync-key", f.keyFile, "--base", "main", "--head", branch}, files...)
			if a.limit > 0 {
				args = append(args, "--limit", fmt.Sprint(a.limit))
			}
			md, mdErr, code := run(t, args...)
			js, jsErr, _ := run(t, append(args, "-o", "json")...)
			var rep struct {
				Syncs []struct {
					Name, Error, Diff string
				}
			}
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatalf("-o json: %v\n%s%s", err, js, jsErr)
			}
			everything := md + mdErr + js + jsErr
			if v, ok := secret.Find(everything); ok {
				t.Errorf("the preview shows %s:\n%s", v.Origin, everything)
			}
			for _, p := range a.plaintext {
				if strings.Contains(everything, p) {
					t.Errorf("the preview shows the value %q:\n%s", p, everything)
				}
			}
			if a.refused != nil {
				errText := ""
				for _, s := range rep.Syncs {
					errText += s.Error
				}
				if code != 2 {
					t.Errorf("exit %d, want 2 (a render refused)\n%s%s", code, md, mdErr)
				}
				for _, w := range a.refused {
					if !strings.Contains(errText, w) {
						t.Errorf("the refusal does not say %q: %s", w, errText)
					}
				}
			} else if code == 2 {
				t.Errorf("refused: %s%s", md, mdErr)
			}
			if a.allow && !strings.Contains(md, mask.Token) {
				t.Errorf("nothing masked:\n%s", md)
			}
			if a.check != nil {
				a.check(t, md)
			}
			if a.commit {
				f.hydrateBranch(t, branch, a.plaintext)
			}
		})
	}
}

// hydrateBranch hydrates the syncs from branch into a branch of the
// deploy repository of its own, and reads back every file of it: no
// value of plaintext is readable, and each Secret is SOPS's.
func (f *attackFixture) hydrateBranch(t *testing.T, branch string, plaintext []string) {
	t.Helper()
	dir := t.TempDir()
	entries, _ := os.ReadDir(f.syncs)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(f.syncs, e.Name()))
		s := strings.ReplaceAll(string(data), "ref: main", "ref: "+branch)
		s = strings.ReplaceAll(s, "branch: env/dev", "branch: env/"+branch)
		os.WriteFile(filepath.Join(dir, e.Name()), []byte(s), 0o644)
	}
	if out, errs, code := run(t, "hydrate", "-f", dir, "--cache-dir", f.cache, "--sync-key", f.keyFile); code != 0 {
		t.Fatalf("hydrating %s: exit %d\n%s%s", branch, code, out, errs)
	}
	git := filepath.Join(f.srv.Root, "deploy.git")
	for _, p := range strings.Fields(testenv.Git(t, git, "ls-tree", "-r", "--name-only", "env/"+branch)) {
		text := f.file(t, "env/"+branch, p)
		for _, v := range plaintext {
			if strings.Contains(text, v) {
				t.Errorf("%s holds %q readable:\n%s", p, v, text)
			}
		}
		if strings.Contains(text, "kind: Secret") && !strings.Contains(text, "sops:") {
			t.Errorf("%s holds a Secret SOPS did not encrypt:\n%s", p, text)
		}
	}
}
