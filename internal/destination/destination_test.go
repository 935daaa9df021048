package destination

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
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

// A change made against a folder as it was read is not put over what
// someone else wrote into that folder meanwhile (a replica that no longer
// leads, a racing CI job): the write gives up once the push is rejected,
// unless theirs already is the change.
func TestWriteGivesUpOnAFolderWrittenMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		theirs string // what the other writer puts in apps/web/a.yaml
		want   error
		holds  string
	}{
		{"another folder's content", "", nil, "a: ours\n"},
		{"the folder, otherwise", "a: theirs\n", ErrFolderMoved, "a: theirs\n"},
		{"the folder, as we would", "a: ours\n", ErrNoChange, "a: ours\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var other *testenv.Work
			var armed atomic.Bool
			var pushes atomic.Int32
			srv := testenv.NewGitServer(t, testenv.WithHook(func(r *http.Request) {
				if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "git-receive-pack") {
					return
				}
				if armed.CompareAndSwap(true, false) {
					files := map[string]string{"other/theirs.yaml": "theirs: 1\n"}
					if tc.theirs != "" {
						files = map[string]string{"apps/web/a.yaml": tc.theirs}
					}
					other.Write(files).Commit("theirs")
					other.Push("main")
					return
				}
				if !strings.Contains(r.UserAgent(), "git/2") {
					pushes.Add(1)
				}
			}))
			url := srv.CreateRepo(t, "deploy")
			other = testenv.NewWork(t, url)
			other.Write(map[string]string{"apps/web/a.yaml": "a: 0\n"}).Commit("init")
			other.Push("main")

			loc, _ := source.ParseLocation(url, "")
			repo, err := source.NewCache(t.TempDir()).Open(ctx, loc, source.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Open(repo, "main")
			if err != nil {
				t.Fatal(err)
			}
			h, _, _ := b.TreeHash("apps/web")
			was := plumbing.NewHash(h)
			armed.Store(true)
			_, err = Write(ctx, repo, "main", []Change{{Path: "apps/web", Files: Folder{"a.yaml": []byte("a: ours\n")}, Was: &was}}, WriteOptions{Message: "ours"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == ErrFolderMoved && !strings.Contains(err.Error(), "apps/web on main") {
				t.Errorf("the error does not name the folder and branch: %v", err)
			}
			if got := testenv.Git(t, filepath.Join(srv.Root, "deploy.git"), "show", "main:apps/web/a.yaml") + "\n"; got != tc.holds {
				t.Errorf("main holds a.yaml = %q, want %q", got, tc.holds)
			}
			if n := pushes.Load(); tc.want != nil && n != 0 {
				t.Errorf("%d more pushes after the rejected one", n)
			}
		})
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
