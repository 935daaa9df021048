package controller

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/synckey"
	"sluice.dev/sluice/internal/testenv"
)

// What a branch pusher and a fork can make the controller's previews
// show, on a real Gitea delivering its own signed webhooks, read back
// from Gitea's API: grafana hydrated from main, its admin password in a
// Secret SOPS-encrypted (decrypted here by the real sops to compare);
// pull requests of the same repository (the sync key's values) and of a
// fork (a throwaway key's) that print the password into a ConfigMap,
// fail with it, claim to be grafana's secret.yaml, and wrap a Secret in
// Lists. No comment, status, log line or Event shows the password or a
// Secret's value; the attacks on generated values are refused naming
// the object and template.
func TestPreviewsOnGiteaShowNoSecret(t *testing.T) {
	t.Parallel()
	g := testenv.StartGitea(t)
	e := newEnv(t)
	keyRef := types.NamespacedName{Namespace: e.ns, Name: "sync-key"}
	if _, err := synckey.Put(context.Background(), e.c, keyRef, synckey.New(), false); err != nil {
		t.Fatal(err)
	}
	addrs, _ := e.start(func(o *Options) { o.SyncKeySecret = keyRef })
	url := g.CreateRepo(t, "web")
	w := testenv.NewWork(t, g.PushURL(url))
	w.CopyChart(t, "grafana", "charts/grafana").Commit("grafana")
	w.Push("main")
	if err := e.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea", Namespace: e.ns},
		StringData: map[string]string{"username": g.User, "password": g.Password}}); err != nil {
		t.Fatal(err)
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	e.apply(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: grafana}
spec:
  source: {repo: ` + url + `, secretRef: {name: gitea}, ref: main, path: charts/grafana}
  render: {helm: {namespace: monitoring}}
  destination: {repo: DST, branch: env/dev, path: apps/grafana, sops: {age: [` + id.Recipient().String() + `]}}
  interval: 1h
`)
	e.ready("grafana", metav1.ConditionTrue, 90*time.Second)
	password := decryptedPassword(t, e.dst("show", "env/dev:apps/grafana/secret-grafana.yaml"), id)
	secret := mask.New(mask.Value{Text: password, Bits: 238, Origin: "main's admin password"})

	e.receiver("gitea-hook", "gitea-s3cret")
	g.API(t, "POST", "repos/"+g.User+"/web/hooks", map[string]any{
		"type": "gitea", "active": true, "events": []string{"pull_request", "pull_request_sync"},
		"config": map[string]string{"url": "http://" + addrs.Hook + "/hook/" + e.ns + "/gitea-hook", "content_type": "json", "secret": "gitea-s3cret"},
	}, nil)
	type readBack struct{ comment, status string }
	read := func(number int, sha string) readBack {
		var cs []struct{ Body string }
		g.API(t, "GET", fmt.Sprintf("repos/%s/web/issues/%d/comments", g.User, number), nil, &cs)
		var combined struct {
			Statuses []struct{ Context, Status, Description string } `json:"statuses"`
		}
		g.API(t, "GET", fmt.Sprintf("repos/%s/web/commits/%s/status", g.User, sha), nil, &combined)
		var rb readBack
		for _, c := range cs {
			rb.comment += c.Body
		}
		for _, s := range combined.Statuses {
			if s.Context == "sluice/preview" {
				rb.status = s.Status + ": " + s.Description
			}
		}
		return rb
	}
	const pw = `include "grafana.password" . | trimAll "\"" | b64dec`
	cases := []struct {
		name, branch string
		fork         bool
		files        map[string]string
		want         []string // in the comment
	}{
		{name: "claiming to be secret.yaml, as the naming function was", branch: "named", files: map[string]string{
			"charts/grafana/templates/z-leak.yaml": "{{- __sluice_template \"grafana/templates/secret.yaml\" }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata: {pw: {{ include \"grafana.password\" . }}}\n"},
			want: []string{"grafana/templates/z-leak.yaml"}},
		{name: "a ConfigMap printing the whole secret.yaml", branch: "leak", files: map[string]string{
			"charts/grafana/templates/z-leak.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata:\n  whole: {{ include \"grafana/templates/secret.yaml\" . | quote }}\n  hex: {{ printf \"%x\" (" + pw + ") }}\n"},
			want: []string{"ConfigMap/monitoring/leak", "grafana/templates/z-leak.yaml", "data.whole"}},
		{name: "fail with the password", branch: "fail", files: map[string]string{
			"charts/grafana/templates/f.yaml": "{{ fail (printf \"the password is %s\" (" + pw + ")) }}\n"},
			want: []string{"grafana/templates/f.yaml", mask.Token}},
		{name: "a fork claiming to be secret.yaml", branch: "claim", fork: true, files: map[string]string{
			"charts/grafana/templates/z-leak.yaml": "{{- __sluice_enter \"0123456789abcdef0123456789abcdef\" \"grafana/templates/secret.yaml\" }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata: {pw: {{ " + pw + " }}}\n"},
			want: []string{"grafana/templates/z-leak.yaml", "may not say which template it is"}},
		{name: "a fork wrapping a Secret in Lists", branch: "lists", fork: true, files: map[string]string{
			"charts/grafana/templates/lists.yaml": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {apiVersion: v1, kind: Secret, metadata: {name: deep}, stringData: {pw: hunter2-in-lists}}\n"},
			want: []string{"secret-deep.yaml", "<added>"}},
	}
	var fork *testenv.Work
	for _, c := range cases {
		repo, user, pass, head := w, g.User, g.Password, c.branch
		if c.fork {
			if fork == nil {
				g.CreateUser(t, "mallory", "Mallory-test-1")
				fork = testenv.NewWork(t, g.Fork(t, "mallory", "Mallory-test-1", "web"))
			}
			repo, user, pass, head = fork, "mallory", "Mallory-test-1", "mallory:"+c.branch
		}
		testenv.Git(t, repo.Dir, "fetch", "-q", "origin", "main")
		testenv.Git(t, repo.Dir, "checkout", "-q", "-b", c.branch, "FETCH_HEAD")
		sha := repo.Write(c.files).Commit(c.name)
		repo.Push(c.branch)
		number := g.OpenPullRequest(t, user, pass, "web", head, "main", c.name)
		var rb readBack
		e.eventually(90*time.Second, func() string {
			rb = read(number, sha)
			if rb.status == "" || strings.HasPrefix(rb.status, "pending") || rb.comment == "" {
				return fmt.Sprintf("%s: #%d has status %q and comment %q", c.name, number, rb.status, rb.comment)
			}
			return ""
		})
		if v, ok := secret.Find(rb.comment + rb.status); ok {
			t.Errorf("%s: the pull request shows %s:\n%s\n%s", c.name, v.Origin, rb.status, rb.comment)
		}
		if strings.Contains(rb.comment, "hunter2") {
			t.Errorf("%s: the comment shows a Secret's value:\n%s", c.name, rb.comment)
		}
		for _, want := range c.want {
			if !strings.Contains(rb.comment, want) {
				t.Errorf("%s: the comment lacks %q:\n%s", c.name, want, rb.comment)
			}
		}
	}
	logs := e.logs.tail(1000000)
	if v, ok := secret.Find(logs); ok || strings.Contains(logs, "hunter2") {
		t.Errorf("the controller's log shows %s", v.Origin)
	}
	var events corev1.EventList
	if err := e.c.List(context.Background(), &events, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(events.Items)
	if v, ok := secret.Find(string(data)); ok {
		t.Errorf("an Event shows %s", v.Origin)
	}
	if strings.Contains(e.dst("log", "--all", "--format=%H %s"), "leak") {
		t.Error("a preview committed")
	}
}

// decryptedPassword is grafana's admin password in its Secret, decrypted
// by the real sops.
func decryptedPassword(t *testing.T, doc string, id *age.X25519Identity) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.SOPSBinary(t), "decrypt", "--output-type", "json", p)
	cmd.Env = []string{"SOPS_AGE_KEY=" + id.String(), "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops decrypt: %v", err)
	}
	var m struct{ Data map[string]string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	pw, err := base64.StdEncoding.DecodeString(m.Data["admin-password"])
	if err != nil || len(pw) != 40 {
		t.Fatalf("the Secret decrypts to %v", m)
	}
	return string(pw)
}
