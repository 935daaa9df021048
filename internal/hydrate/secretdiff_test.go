package hydrate

import (
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"sluice.dev/sluice/internal/synckey"
)

const secretSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: db}
spec:
  source: {repo: APP, ref: main, path: deploy/db}
  destination: {repo: DST, branch: env/dev, path: apps/db, sops: {age: [RECIPIENT]}}
`

// A dry run's diff of encrypted Secrets says, key by key, what changed:
// a changed value, an added key, an unchanged one, a removed one; it
// shows no value and no digest of one (the provenance record's digests
// are each bound to its Secret and key: none compares with another), so
// that no two values can be compared.
func TestADryRunSaysWhichKeysOfASecretChangedAndNothingMore(t *testing.T) {
	f := newFixture(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	key := synckey.New()
	f.sync("db", strings.Replace(secretSync, "RECIPIENT", id.Recipient().String(), 1))
	secret := func(data string) map[string]string {
		return map[string]string{"deploy/db/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: prod}\nstringData: {" + data + "}\n"}
	}
	f.app.Write(secret("user: app, password: hunter2-one, token: hunter2-gone")).Commit("db")
	f.app.Push("main")
	withKey := func(o *Options) { o.SyncKey = key }
	if r := f.result(f.run(withKey), "db"); r.Err != nil {
		t.Fatal(r.Err)
	}
	f.app.Write(secret("user: app, password: hunter2-two, extra: hunter2-two")).Commit("db changes")
	f.app.Push("main")
	r := f.result(f.run(withKey, func(o *Options) { o.DryRun = true }), "db")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, want := range []string{"-  password: <hidden>", "+  password: <changed>", "+  extra: <added>", "-  token: <hidden>", "   user: <hidden>"} {
		if !strings.Contains(r.Diff, want) {
			t.Errorf("the diff lacks %q:\n%s", want, r.Diff)
		}
	}
	_, file, _ := strings.Cut(r.Diff, "--- a/apps/db/secret-db.yaml")
	if file == "" || strings.Contains(r.Diff, "hunter2") || strings.Contains(file, "ENC[") || regexp.MustCompile(`[0-9a-f]{12}`).MatchString(file) {
		t.Errorf("the diff shows a value, ciphertext or digest:\n%s", r.Diff)
	}
}
