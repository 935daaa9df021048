package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"sluice.dev/sluice/internal/testenv"
)

func mustLoc(t testing.TB, raw string) Location {
	t.Helper()
	loc, err := ParseLocation(raw, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseLocation(t *testing.T) {
	tests := []struct {
		raw, key, ref string
		local         bool
		wantErr       string
	}{
		{raw: "https://Git.Example.com/team/app.git", key: "https://git.example.com/team/app"},
		{raw: "https://user:secret@git.example.com/team/app/", key: "https://git.example.com/team/app"},
		{raw: "git@github.com:org/repo.git", key: "ssh://github.com/org/repo"},
		{raw: "ssh://git@github.com/org/repo", key: "ssh://github.com/org/repo"},
		{raw: "https://git.example.com/team/code.git?ref=alice/feature", key: "https://git.example.com/team/code", ref: "alice/feature"},
		{raw: "file:///srv/repos/app.git", key: "file:///srv/repos/app.git", local: true},
		{raw: "ftp://example.com/x", wantErr: "unsupported scheme"},
		{raw: "https://x.com/a?branch=b", wantErr: "unknown query parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			loc, err := ParseLocation(tt.raw, "/base")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if loc.Key() != tt.key || loc.Ref != tt.ref || loc.IsLocal() != tt.local {
				t.Errorf("got key %q ref %q local %v", loc.Key(), loc.Ref, loc.IsLocal())
			}
			if strings.Contains(loc.String(), "secret") {
				t.Errorf("String() leaks the password: %s", loc)
			}
		})
	}
	loc, err := ParseLocation("../apps/web", "/work/syncs")
	if err != nil || loc.Path != "/work/apps/web" {
		t.Errorf("relative path: %+v %v", loc, err)
	}
}

func TestRedact(t *testing.T) {
	got := Redact(`Get "https://bob:hunter2@git.example.com/x.git/info/refs": 401; https://tok3n@h/x`)
	if strings.Contains(got, "hunter2") || strings.Contains(got, "tok3n") || !strings.Contains(got, "bob:***@") {
		t.Errorf("Redact = %s", got)
	}
}

func TestCacheClonesOverHTTPOnceAndResolvesRefs(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	first := w.Write(map[string]string{"deploy/base/a.yaml": "a: 1\n", "README.md": "hi\n"}).Commit("one")
	testenv.Git(t, w.Dir, "tag", "-a", "v1.0.0", "-m", "release")
	w.Push("main", "v1.0.0")
	second := w.Write(map[string]string{"deploy/base/a.yaml": "a: 2\n"}).Commit("two")
	w.Push("main")

	cache := NewCache(t.TempDir())
	loc := mustLoc(t, url)
	repo, err := cache.Open(ctx, loc, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := srv.Requests.Load()
	again, err := cache.Open(ctx, loc, OpenOptions{})
	if err != nil || again != repo || srv.Requests.Load() != before {
		t.Fatalf("second Open of one Cache fetched again (requests %d → %d)", before, srv.Requests.Load())
	}
	for ref, want := range map[string]string{"": second, "main": second, "v1.0.0": first, first: first, "refs/heads/main": second} {
		c, err := repo.Resolve(ref)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", ref, err)
		}
		if c.Hash.String() != want {
			t.Errorf("Resolve(%q) = %s, want %s", ref, c.Hash, want)
		}
	}
	if _, err := repo.Resolve("nope"); err == nil || !strings.Contains(err.Error(), `no branch or tag "nope"`) {
		t.Errorf("Resolve(nope) = %v", err)
	}

	// A new Cache over the same directory fetches incrementally.
	third := w.Write(map[string]string{"x": "3\n"}).Commit("three")
	w.Push("main")
	repo2, err := NewCache(cache.dir).Open(ctx, loc, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := repo2.Resolve("main"); c.Hash.String() != third {
		t.Errorf("after refetch main = %s, want %s", c.Hash, third)
	}
}

func TestTreeFSReadsCommitAndMatchesDirFS(t *testing.T) {
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{"app/base/a.yaml": "a: 1\n", "app/overlay/k.yaml": "k: 1\n", "other/z": "z\n"})
	if err := os.Symlink("../base/a.yaml", filepath.Join(w.Dir, "app/overlay/link.yaml")); err != nil {
		t.Fatal(err)
	}
	w.Commit("one")
	repo, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, w.Dir+"/app"), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if repo.Prefix() != "app" {
		t.Fatalf("prefix = %q", repo.Prefix())
	}
	c, err := repo.Resolve("")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := repo.Tree(c)
	if err != nil {
		t.Fatal(err)
	}
	// ReadDir reports a link as what it points to (so that walks follow
	// links, each checked by the renderer reading it), which
	// fstest.TestFS would hold against Lstat: test the io/fs behaviour
	// through Open alone.
	if err := fstest.TestFS(struct{ fs.FS }{tree}, "base/a.yaml", "overlay/k.yaml", "overlay/link.yaml"); err != nil {
		t.Fatal(err)
	}
	data, err := tree.ReadFile("overlay/link.yaml")
	if err != nil || string(data) != "a: 1\n" {
		t.Fatalf("symlink read = %q, %v", data, err)
	}
	dir, err := Dir(filepath.Join(w.Dir, "app"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	for _, name := range []string{"base/a.yaml", "overlay/k.yaml"} {
		a, _ := tree.Hash(name)
		b, _ := dir.Hash(name)
		if a == "" || a != b {
			t.Errorf("%s: tree hash %q, dir hash %q", name, a, b)
		}
	}
}

func TestTrackerRecordsWhatWasReadAndUnchangedComparesIt(t *testing.T) {
	base := fstest.MapFS{
		"base/a.yaml":      {Data: []byte("a")},
		"overlay/k.yaml":   {Data: []byte("k")},
		"overlay/p.yaml":   {Data: []byte("p")},
		"unrelated/z.yaml": {Data: []byte("z")},
	}
	tr := Track(mapFS{base})
	tr.ReadFile("overlay/k.yaml")
	tr.ReadFile("base/a.yaml")
	tr.Stat("overlay/kustomization.yml")
	tr.ReadDir("overlay")
	inputs := tr.Inputs()
	var paths []string
	for _, in := range inputs {
		paths = append(paths, in.Path+"="+in.Hash)
	}
	want := "base/a.yaml=" + BlobHash([]byte("a")) + " overlay=" + listingHash([]fs.DirEntry{
		fs.FileInfoToDirEntry(mustStat(t, base, "overlay/k.yaml")), fs.FileInfoToDirEntry(mustStat(t, base, "overlay/p.yaml")),
	}) + " overlay/k.yaml=" + BlobHash([]byte("k")) + " overlay/kustomization.yml=none"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("inputs =\n%s\nwant\n%s", got, want)
	}
	change := func(edit func(fstest.MapFS)) bool {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = v
		}
		edit(m)
		return Unchanged(mapFS{m}, inputs, nil)
	}
	if !change(func(m fstest.MapFS) { m["unrelated/z.yaml"] = &fstest.MapFile{Data: []byte("z2")} }) {
		t.Error("an unread file's change counted")
	}
	for name, edit := range map[string]func(fstest.MapFS){
		"read file edited":   func(m fstest.MapFS) { m["base/a.yaml"] = &fstest.MapFile{Data: []byte("a2")} },
		"absent file added":  func(m fstest.MapFS) { m["overlay/kustomization.yml"] = &fstest.MapFile{Data: []byte("x")} },
		"listed dir changed": func(m fstest.MapFS) { delete(m, "overlay/p.yaml") },
	} {
		if change(edit) {
			t.Errorf("%s: not seen as a change", name)
		}
	}
}

func mustStat(t *testing.T, m fstest.MapFS, name string) fs.FileInfo {
	info, err := m.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// mapFS adds blob hashes to fstest.MapFS.
type mapFS struct{ fstest.MapFS }

func (m mapFS) Hash(name string) (string, error) {
	data, err := m.MapFS.ReadFile(name)
	if err != nil {
		return "", err
	}
	return BlobHash(data), nil
}

func TestUpdateBranchPushesAndReportsStale(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "deploy")
	repo, err := NewCache(t.TempDir()).Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !repo.Empty() {
		t.Fatal("new repository not empty")
	}
	commit := func(parent plumbing.Hash, content string) plumbing.Hash {
		blob, err := repo.WriteBlob([]byte(content))
		if err != nil {
			t.Fatal(err)
		}
		tree, err := repo.WriteTree([]object.TreeEntry{{Name: "f", Mode: filemode.Regular, Hash: blob}})
		if err != nil {
			t.Fatal(err)
		}
		c := &object.Commit{Message: content, TreeHash: tree}
		if !parent.IsZero() {
			c.ParentHashes = []plumbing.Hash{parent}
		}
		h, err := repo.WriteCommit(c)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	c1 := commit(plumbing.ZeroHash, "one")
	if err := repo.UpdateBranch(ctx, "env/dev", c1, plumbing.ZeroHash, UpdateBranchOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Git(t, filepath.Join(srv.Root, "deploy.git"), "rev-parse", "env/dev"); got != c1.String() {
		t.Fatalf("server env/dev = %s, want %s", got, c1)
	}
	// Someone else pushes on top.
	w := testenv.NewWork(t, url)
	testenv.Git(t, w.Dir, "fetch", "-q", "origin", "env/dev")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "env/dev", "FETCH_HEAD")
	theirs := w.Write(map[string]string{"g": "theirs\n"}).Commit("theirs")
	w.Push("env/dev")

	c2 := commit(c1, "two")
	err = repo.UpdateBranch(ctx, "env/dev", c2, c1, UpdateBranchOptions{})
	if !errors.Is(err, ErrStale) {
		t.Fatalf("UpdateBranch over a moved branch = %v, want ErrStale", err)
	}
	if tip, _ := repo.Branch("env/dev"); tip.String() != theirs {
		t.Fatalf("after ErrStale the clone's env/dev = %s, want the new tip %s", tip, theirs)
	}
	if got := testenv.Git(t, filepath.Join(srv.Root, "deploy.git"), "rev-parse", "env/dev"); got != theirs {
		t.Fatalf("the server's branch was overwritten: %s", got)
	}
}

func TestOpenRefusesWrongPasswordWithoutLeakingIt(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("alice", "right"))
	url := srv.CreateRepo(t, "private")
	_, err := NewCache(t.TempDir(), WithAuth(Auth{Username: "alice", Password: "wrong-secret", Hosts: []string{HostOf(url)}})).Open(context.Background(), mustLoc(t, url), OpenOptions{})
	if err == nil || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewCache(t.TempDir(), WithAuth(Auth{Username: "alice", Password: "right", Hosts: []string{HostOf(url)}})).Open(context.Background(), mustLoc(t, url), OpenOptions{}); err != nil {
		t.Fatalf("with the right password: %v", err)
	}
}

func TestOpenLocalDestinationCreatesBareRepository(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "deploy.git")
	repo, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, dir), OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if !repo.Empty() {
		t.Error("not empty")
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		t.Errorf("no bare repository created: %v", err)
	}
	notRepo := t.TempDir()
	os.WriteFile(filepath.Join(notRepo, "file"), nil, 0o644)
	if _, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, notRepo), OpenOptions{Create: true}); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("opening a non-empty plain directory as destination: %v", err)
	}
	var _ fs.FS = (*TreeFS)(nil)
}

func TestCloneOverSSHWithKeyFileAndKnownHosts(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.CreateRepo(t, "app")
	ssh := testenv.NewSSHGitServer(t, srv.Root)
	w := testenv.NewWork(t, srv.URL("app"))
	want := w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")
	ctx := context.Background()
	auth := Auth{SSHKeyFile: ssh.KeyFile, KnownHosts: []string{ssh.KnownHosts}}
	repo, err := NewCache(t.TempDir(), WithAuth(auth)).Open(ctx, mustLoc(t, ssh.URL("app")), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := repo.Resolve("main"); err != nil || c.Hash.String() != want {
		t.Fatalf("Resolve over ssh = %v, %v", c.Hash, err)
	}
	// A host whose key is not known is refused.
	other := t.TempDir() + "/known_hosts"
	os.WriteFile(other, nil, 0o600)
	_, err = NewCache(t.TempDir(), WithAuth(Auth{SSHKeyFile: ssh.KeyFile, KnownHosts: []string{other}})).Open(ctx, mustLoc(t, ssh.URL("app")), OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("unknown host key: %v", err)
	}
	// The same from a Secret's bytes: an identity and known_hosts, given
	// as a resource's own credentials.
	key, _ := os.ReadFile(ssh.KeyFile)
	known, _ := os.ReadFile(ssh.KnownHosts)
	own := &Credentials{Auth: Auth{SSHKey: key, KnownHostsData: known}, Scope: "ns/git-ssh@1"}
	if repo, err = NewCache(t.TempDir()).Open(ctx, mustLoc(t, ssh.URL("app")), OpenOptions{Credentials: own}); err != nil {
		t.Fatalf("identity and known_hosts from bytes: %v", err)
	}
	own.Auth.KnownHostsData = []byte("example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	if _, err = NewCache(t.TempDir()).Open(ctx, mustLoc(t, ssh.URL("app")), OpenOptions{Credentials: own}); err == nil || !strings.Contains(err.Error(), "not in known_hosts") {
		t.Fatalf("host key not in the Secret's known_hosts: %v", err)
	}
}

func TestUnchangedUsesFolderHashesButNotAcrossSymlinks(t *testing.T) {
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{"a/k.yaml": "k: 1\n", "shared/t.yaml": "t: 1\n", "b/x.yaml": "x\n"})
	if err := os.Symlink("../shared/t.yaml", filepath.Join(w.Dir, "a/link.yaml")); err != nil {
		t.Fatal(err)
	}
	w.Commit("one")
	repo, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, w.Dir), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	treeAt := func() *TreeFS {
		c, err := repo.Resolve("HEAD")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := repo.Tree(c)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	tr := Track(treeAt())
	tr.ReadFile("a/k.yaml")
	tr.ReadFile("a/link.yaml")
	tr.ReadFile("b/x.yaml")
	inputs := tr.Inputs()
	trees := Trees(tr.FS, inputs)
	if len(trees) != 1 || trees[0].Path != "b" {
		t.Fatalf("trees = %+v: the folder with a link must not vouch for it", trees)
	}
	// The link's target changes; the folder holding the link does not.
	w.Write(map[string]string{"shared/t.yaml": "t: 2\n"}).Commit("two")
	repo, _ = NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, w.Dir), OpenOptions{})
	if Unchanged(treeAt(), inputs, trees) {
		t.Error("a change behind a symlink went unseen")
	}
}

func TestCredentialsGoOnlyToTheirHostAndNeverToDisk(t *testing.T) {
	srv := testenv.NewGitServer(t, testenv.WithBasicAuth("bot", "s3cret-token"))
	url := srv.CreateRepo(t, "private")
	w := testenv.NewWork(t, strings.Replace(url, "http://", "http://bot:s3cret-token@", 1))
	w.Write(map[string]string{"a": "a\n"}).Commit("one")
	w.Push("main")
	// Another host (the same server under another name) that a source
	// might name: it must see no credentials.
	var seen []string
	other := testenv.NewGitServer(t, testenv.WithHook(func(r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			seen = append(seen, h)
		}
	}))
	otherURL := other.CreateRepo(t, "public")
	otherURL = strings.Replace(otherURL, "127.0.0.1", "localhost", 1)

	dir := t.TempDir()
	cache := NewCache(dir, WithAuth(Auth{Username: "bot", Password: "s3cret-token"}))
	if _, err := cache.Open(context.Background(), mustLoc(t, url), OpenOptions{}); err == nil {
		t.Fatal("credentials went to a host nobody trusted")
	}
	cache = NewCache(dir, WithAuth(Auth{Username: "bot", Password: "s3cret-token"}))
	cache.Trust(url)
	if _, err := cache.Open(context.Background(), mustLoc(t, url), OpenOptions{}); err != nil {
		t.Fatalf("trusted host: %v", err)
	}
	if _, err := cache.Open(context.Background(), mustLoc(t, otherURL), OpenOptions{}); err != nil {
		t.Fatalf("other host: %v", err)
	}
	if len(seen) > 0 {
		t.Errorf("the other host was sent credentials: %v", seen)
	}
	// Credentials in a URL are used, and not written to the clone.
	inURL := strings.Replace(url, "http://", "http://bot:s3cret-token@", 1)
	if _, err := NewCache(dir).Open(context.Background(), mustLoc(t, inURL), OpenOptions{}); err != nil {
		t.Fatalf("credentials in the URL: %v", err)
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if data, _ := os.ReadFile(p); strings.Contains(string(data), "s3cret-token") {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode = %v, %v; want 0700", info.Mode().Perm(), err)
	}
	// Over plain http to another machine, credentials are refused.
	if _, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, "http://bot:s3cret-token@git.example.com/r.git"), OpenOptions{}); err == nil || !strings.Contains(err.Error(), "use https") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("plain http: %v", err)
	}
}

// TestNoCredentialsMeansNothingOfTheMachines: credentials that name no
// ssh identity (a controller's sync without a Secret) use neither the
// ssh agent nor ~/.ssh/known_hosts, though both would let the clone
// through; a person's credentials from the environment do.
func TestNoCredentialsMeansNothingOfTheMachines(t *testing.T) {
	srv := testenv.NewGitServer(t)
	srv.CreateRepo(t, "app")
	sshd := testenv.NewSSHGitServer(t, srv.Root)
	w := testenv.NewWork(t, srv.URL("app"))
	w.Write(map[string]string{"a": "1\n"}).Commit("one")
	w.Push("main")
	agent := testenv.NewSSHAgent(t, sshd.KeyFile)
	home := t.TempDir()
	known, _ := os.ReadFile(sshd.KnownHosts)
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), known, 0o600)
	t.Setenv("HOME", home)
	t.Setenv("SSH_AUTH_SOCK", agent.Sock)
	ctx := context.Background()
	loc := mustLoc(t, sshd.URL("app"))

	_, err := NewCache(t.TempDir()).Open(ctx, loc, OpenOptions{Credentials: &Credentials{Scope: "anonymous"}})
	if err == nil || !strings.Contains(err.Error(), "ssh needs credentials") {
		t.Errorf("no Secret: %v, want ssh refused", err)
	}
	if _, err := NewCache(t.TempDir()).Open(ctx, loc, OpenOptions{}); err == nil {
		t.Error("a Cache without credentials reached the ssh server")
	}
	if n := agent.Connections(); n != 0 {
		t.Errorf("the ssh agent was asked %d times", n)
	}
	key, _ := os.ReadFile(sshd.KeyFile)
	_, err = NewCache(t.TempDir()).Open(ctx, loc, OpenOptions{Credentials: &Credentials{Auth: Auth{SSHKey: key}, Scope: "ns/id-only"}})
	if err == nil || !strings.Contains(err.Error(), "known_hosts beside the identity") {
		t.Errorf("an identity without known_hosts: %v, want ~/.ssh/known_hosts left unread", err)
	}

	// A person's credentials do use them.
	if _, err := NewCache(t.TempDir(), WithAuth(AuthFromEnv(os.Getenv))).Open(ctx, loc, OpenOptions{}); err != nil {
		t.Fatalf("through the agent and ~/.ssh/known_hosts: %v", err)
	}
	if agent.Connections() == 0 {
		t.Error("the person's clone did not use the agent")
	}
}

// A push sends what its commit adds to the tree it was made on, not
// what the remote's history lacks by a walk of it: on a branch of 3,000
// commits, a commit changing one file of a nested folder sends that
// commit, its three changed trees and the one blob, and the server holds
// a complete, connected history after it (git fsck).
func TestAPushSendsWhatTheCommitAdds(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "deploy")
	w := testenv.NewWork(t, url)
	var b strings.Builder
	for i := 1; i <= 3000; i++ {
		data := fmt.Sprintf("v%d\n", i)
		fmt.Fprintf(&b, "commit refs/heads/env\ncommitter T <t@example.com> %d +0000\ndata 2\nc\n", 1700000000+i)
		fmt.Fprintf(&b, "M 644 inline apps/app%d/cm.yaml\ndata %d\n%s\n", i%50, len(data), data)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = w.Dir, strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
	testenv.Git(t, w.Dir, "push", "-q", "origin", "env")

	repo, err := NewCache(t.TempDir()).Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tip, err := repo.Branch("env")
	if err != nil {
		t.Fatal(err)
	}
	root, err := repo.git.CommitObject(tip)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := root.Tree()
	if err != nil {
		t.Fatal(err)
	}
	apps, _ := tree.Tree("apps")
	app7, _ := apps.Tree("app7")
	blob, err := repo.WriteBlob([]byte("changed\n"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(entries []object.TreeEntry, name string, h plumbing.Hash, mode filemode.FileMode) plumbing.Hash {
		out := slices.Clone(entries)
		for i := range out {
			if out[i].Name == name {
				out[i].Hash, out[i].Mode = h, mode
			}
		}
		th, err := repo.WriteTree(out)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	t7 := write(app7.Entries, "cm.yaml", blob, filemode.Regular)
	ta := write(apps.Entries, "app7", t7, filemode.Dir)
	tr := write(tree.Entries, "apps", ta, filemode.Dir)
	c, err := repo.WriteCommit(&object.Commit{Message: "one file", TreeHash: tr, ParentHashes: []plumbing.Hash{tip}})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := repo.newObjects(c, tip)
	if err != nil {
		t.Fatal(err)
	}
	if want := []plumbing.Hash{c, tr, ta, t7, blob}; !slices.Equal(sent, want) {
		t.Errorf("sends %v, want the commit, its 3 changed trees and the blob %v", sent, want)
	}
	if err := repo.UpdateBranch(ctx, "env", c, tip, UpdateBranchOptions{}); err != nil {
		t.Fatal(err)
	}
	server := filepath.Join(srv.Root, "deploy.git")
	if got := testenv.Git(t, server, "rev-parse", "env"); got != c.String() {
		t.Fatalf("server env = %s, want %s", got, c)
	}
	if got := testenv.Git(t, server, "cat-file", "-p", "env:apps/app7/cm.yaml"); got != "changed" {
		t.Errorf("server holds %q", got)
	}
	testenv.Git(t, server, "fsck", "--no-dangling")
}

// What a server says while refusing a push is kept readable and bounded:
// its lines joined, progress counters and control characters dropped, the
// end kept when it says much.
func TestServerSaid(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"error: env/dev is protected\n", "error: env/dev is protected"},
		{"Resolving deltas: 100% (3/3)\rline one\n\x1b[31mline two\x1b[0m\n", "line one / [31mline two[0m"},
		{strings.Repeat("x", 600) + "\nthe end\n", "…" + strings.Repeat("x", 490) + " / the end"},
		{"", ""},
	} {
		var s serverSaid
		s.Write([]byte(tt.in))
		if got := s.String(); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.in, got, tt.want)
		}
	}
	var big serverSaid
	for range 100 {
		big.Write([]byte(strings.Repeat("y", 100) + "\n"))
	}
	if len(big.buf) > serverSaidMax {
		t.Errorf("kept %d bytes, want at most %d", len(big.buf), serverSaidMax)
	}
}
