package destination

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"

	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

func TestWriteRetriesOnTopOfAConcurrentPushNeverForcing(t *testing.T) {
	ctx := context.Background()
	var other *testenv.Work
	var armed atomic.Bool
	srv := testenv.NewGitServer(t, testenv.WithHook(func(r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "git-receive-pack") && armed.CompareAndSwap(true, false) {
			// Someone else lands a commit while our push is on the wire.
			other.Write(map[string]string{"other/theirs.yaml": "theirs: 1\n"}).Commit("theirs")
			other.Push("main")
		}
	}))
	url := srv.CreateRepo(t, "deploy")
	other = testenv.NewWork(t, url)
	other.Write(map[string]string{"README.md": "hi\n"}).Commit("init")
	other.Push("main")

	loc, _ := source.ParseLocation(url, "")
	repo, err := source.NewCache(t.TempDir()).Open(ctx, loc, source.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	res, err := Write(ctx, repo, "main", []Change{{Path: "apps/web", Files: Folder{"a.yaml": []byte("a: 1\n")}}}, WriteOptions{Message: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 {
		t.Errorf("attempts = %d, want 2 (rejected once, then on top of theirs)", res.Attempts)
	}
	bare := filepath.Join(srv.Root, "deploy.git")
	files := testenv.Git(t, bare, "ls-tree", "-r", "--name-only", "main")
	if files != "README.md\napps/web/a.yaml\nother/theirs.yaml" {
		t.Errorf("main holds:\n%s", files)
	}
	if log := testenv.Git(t, bare, "log", "--format=%s", "main"); log != "ours\ntheirs\ninit" {
		t.Errorf("history:\n%s", log)
	}
}

func TestWriteReplacesOnlyItsFolder(t *testing.T) {
	ctx := context.Background()
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{
		"apps/web/old.yaml": "old\n", "apps/web/sub/deep.yaml": "deep\n",
		"apps/webshop/keep.yaml": "keep\n", "apps/other/keep.yaml": "keep\n", "top.txt": "top\n",
	}).Commit("init")
	bare := t.TempDir() + "/deploy.git"
	testenv.Git(t, "", "clone", "-q", "--bare", w.Dir, bare)
	loc, _ := source.ParseLocation(bare, "")
	repo, err := source.NewCache(t.TempDir()).Open(ctx, loc, source.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	before := testenv.Git(t, bare, "ls-tree", "-r", "main")
	if _, err := Write(ctx, repo, "main", []Change{{Path: "apps/web", Files: Folder{"new.yaml": []byte("new\n")}}}, WriteOptions{Message: "m"}); err != nil {
		t.Fatal(err)
	}
	after := testenv.Git(t, bare, "ls-tree", "-r", "main")
	for _, line := range strings.Split(before, "\n") {
		if !strings.Contains(line, "apps/web/") && !strings.Contains(after, line) {
			t.Errorf("lost or changed: %s", line)
		}
	}
	if strings.Contains(after, "apps/web/old.yaml") || strings.Contains(after, "apps/web/sub/deep.yaml") || !strings.Contains(after, "apps/web/new.yaml") {
		t.Errorf("folder not replaced:\n%s", after)
	}
	if _, err := Write(ctx, repo, "main", []Change{{Path: "apps/web", Files: Folder{"new.yaml": []byte("new\n")}}}, WriteOptions{Message: "m"}); err != ErrNoChange {
		t.Errorf("rewriting the same folder = %v, want ErrNoChange", err)
	}
}

func TestManifestsNamesFilesStablyAndUniquely(t *testing.T) {
	objs, err := kio.FromBytes([]byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:thing"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
`))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Manifests(objs, "perObject")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Names(), " "); got != "clusterrole-system_thing.yaml configmap-a-cfg.yaml configmap-b-cfg.yaml deployment-web.yaml" {
		t.Errorf("names = %s", got)
	}
	single, err := Manifests(objs, "single")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(single["manifest.yaml"]); strings.Count(got, "---\n") != 3 || len(single) != 1 {
		t.Errorf("single layout:\n%s", got)
	}
}
