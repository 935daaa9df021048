package hydrate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// A local working tree, dirty, hydrated into a file:// repository.
func TestHydrateLocalWorkingTreeIntoFileURL(t *testing.T) {
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: \"1\"}\n"}).Commit("one")
	dst := filepath.Join(t.TempDir(), "deploy.git")
	syncs := t.TempDir()
	rel, _ := filepath.Rel(syncs, w.Dir)
	os.WriteFile(filepath.Join(syncs, "s.yaml"), []byte(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: local}
spec:
  source: {repo: `+rel+`, path: deploy}
  destination: {repo: "file://`+dst+`", branch: env/dev, path: apps/a}
`), 0o644)
	run := func() Result {
		set, err := config.Load(syncs)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), set.ManifestSyncs, Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Results[0]
	}
	r := run()
	if r.Result != Committed {
		t.Fatalf("%s %s", r.Result, r.Error)
	}
	prov := testenv.Show(t, dst, "env/dev", "apps/a/.sluice.yaml")
	if !strings.Contains(prov, "commit: "+w.Head()) || strings.Contains(prov, "dirty") || !strings.Contains(prov, "repo: "+rel) {
		t.Errorf("clean tree provenance:\n%s", prov)
	}
	// An uncommitted edit is hydrated, and marked.
	w.Write(map[string]string{"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {v: \"2\"}\n"})
	if r := run(); r.Result != Committed {
		t.Fatalf("dirty: %s %s", r.Result, r.Error)
	}
	if prov := testenv.Show(t, dst, "env/dev", "apps/a/.sluice.yaml"); !strings.Contains(prov, "dirty: true") {
		t.Errorf("dirty tree provenance:\n%s", prov)
	}
	if !strings.Contains(testenv.Show(t, dst, "env/dev", "apps/a/configmap-a.yaml"), `v: "2"`) {
		t.Error("uncommitted edit not hydrated")
	}
	if r := run(); r.Result != Unchanged || r.Rendered {
		t.Errorf("again: %s rendered %v", r.Result, r.Rendered)
	}
}

func TestHydrateKeepsCredentialsOutOfEverythingItWrites(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("bot", "s3cret-token"))
	appURL := srv.CreateRepo(t, "app")
	dstURL := srv.CreateRepo(t, "deploy")
	withCreds := strings.Replace(appURL, "http://", "http://bot:s3cret-token@", 1)
	w := testenv.NewWork(t, withCreds)
	w.Write(map[string]string{"k/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"}).Commit("one")
	w.Push("main")
	syncs := t.TempDir()
	os.WriteFile(filepath.Join(syncs, "s.yaml"), []byte(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: creds}
spec:
  source: {repo: "`+withCreds+`", path: k}
  destination: {repo: "`+dstURL+`", branch: env/dev, path: apps/a}
`), 0o644)
	set, err := config.Load(syncs)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), set.ManifestSyncs, Options{
		Cache:    source.NewCache(t.TempDir(), source.WithAuth(source.Auth{Username: "bot", Password: "s3cret-token", Hosts: []string{source.HostOf(dstURL)}})),
		Registry: registry.New(),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Result != Committed {
		t.Fatalf("%s %s", r.Result, r.Error)
	}
	bare := filepath.Join(srv.Root, "deploy.git")
	everything := testenv.Git(t, bare, "log", "-p", "--format=%B", "env/dev") + r.Source + r.Destination
	if strings.Contains(everything, "s3cret-token") {
		t.Errorf("the token leaked:\n%s", everything)
	}
	// A wrong password in the URL fails with an error that does not show it.
	bad := set.ManifestSyncs[0]
	bad.Spec.Source.Repo = strings.Replace(withCreds, "s3cret-token", "wrong-token", 1)
	rep, err = Run(context.Background(), []config.ManifestSync{bad}, Options{Cache: source.NewCache(t.TempDir()), Registry: registry.New()})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Result != Failed || strings.Contains(r.Error, "wrong-token") || !strings.Contains(r.Error, "bot:***@") {
		t.Errorf("wrong credentials: %s %q", r.Result, r.Error)
	}
}
