package repoconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/testenv"
)

// TestARepositoryCannotCommandTheMachineOrReadItsDisk is what an attacker
// who can only push to a repository a RepoConfig points at tries: an
// Image whose builder runs a shell, ManifestSyncs that render this
// machine's ~/.kube or write into the repository Sluice runs in.
func TestARepositoryCannotCommandTheMachineOrReadItsDisk(t *testing.T) {
	f := testenv.NewPlatform(t)
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".kube"), 0o755)
	os.WriteFile(filepath.Join(home, ".kube", "token.yaml"), []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\nstringData: {token: kube-admin-token}\n"), 0o600)
	marker := filepath.Join(t.TempDir(), "pwned")
	f.Code.Write(f.Expand(map[string]string{
		"deploy/sluice/evil.yaml": `apiVersion: sluice.dev/v1alpha1
kind: Image
metadata: {name: evil, labels: {env: dev}}
spec:
  image: REG/team/evil
  base: scratch
  source: [{repo: ., mappings: [{src: bin/worker, dest: /w}]}]
  builder: {command: [sh, -c, "touch ` + marker + `"]}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: kube-path, labels: {env: dev}}
spec:
  source: {repo: ` + home + `, path: .kube}
  destination: {repo: DEPLOY, branch: stolen, path: a}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: kube-url, labels: {env: dev}}
spec:
  source: {repo: "file://` + home + `", path: .kube}
  destination: {repo: DEPLOY, branch: stolen, path: b}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: dest-disk, labels: {env: dev}}
spec:
  source: {repo: ., path: deploy/overlays/dev}
  destination: {repo: "` + home + `/somewhere.git", branch: stolen, path: c}
`})).Commit("evil")
	f.Code.Push("main")
	cache, o := engines(f)
	_, err := Load(context.Background(), cache, []string{f.RepoConfig("rc.yaml", "")}, override.Set{})
	if err == nil {
		t.Fatal("resources naming this machine's disk were loaded")
	}
	for _, want := range []string{
		"ManifestSync kube-path: spec.source.repo: \"" + home + "\" is on this machine's disk",
		"ManifestSync kube-url: spec.source.repo: \"file://" + home + "\" is on this machine's disk",
		"ManifestSync dest-disk: spec.destination.repo: \"" + home + "/somewhere.git\" is on this machine's disk",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "kube-admin-token") {
		t.Errorf("the error shows the secret: %v", err)
	}

	// Without the disk references: the builder still must not run unless
	// the RepoConfig allows it.
	f.Code.Write(f.Expand(map[string]string{"deploy/sluice/evil.yaml": strings.Split(readFile(t, filepath.Join(f.Code.Dir, "deploy/sluice/evil.yaml")), "---\n")[0]})).Commit("only the image")
	f.Code.Push("main")
	cache, o = engines(f) // a new run sees the new commit
	l, err := Load(context.Background(), cache, []string{f.RepoConfig("rc.yaml", "")}, override.Set{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Reconcile(context.Background(), l, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the repository's builder ran a command on this machine")
	}
	var evil string
	for _, r := range rep.Images {
		if r.Name == "evil" {
			evil = r.Error
		}
	}
	if !strings.Contains(evil, "spec.allowBuilders: true on its RepoConfig or --allow-builders") {
		t.Errorf("evil image: %q", evil)
	}
	// Allowed by the RepoConfig, it runs.
	cache, o = engines(f)
	l, err = Load(context.Background(), cache, []string{f.RepoConfig("rc.yaml", "  allowBuilders: true\n")}, override.Set{})
	if err != nil {
		t.Fatal(err)
	}
	Reconcile(context.Background(), l, o)
	if _, err := os.Stat(marker); err != nil {
		t.Error("allowed, the builder did not run")
	}
}

// TestAFoundSyncWithoutDestinationWritesIntoItsOwnRepository: the
// directory Sluice runs in is no default.
func TestAFoundSyncWithoutDestinationWritesIntoItsOwnRepository(t *testing.T) {
	f := testenv.NewPlatform(t)
	f.Code.Write(f.Expand(map[string]string{"deploy/sluice/own.yaml": `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: own, labels: {env: dev}}
spec:
  source: {repo: ., path: deploy/overlays/dev}
  destination: {branch: env/own, path: apps}
`})).Commit("own")
	f.Code.Push("main")
	// Run from inside another repository.
	here := testenv.NewWork(t, "")
	here.Write(map[string]string{"README": "x\n"}).Commit("here")
	t.Chdir(here.Dir)
	rep := reconcile(t, f, f.RepoConfig("rc.yaml", ""))
	if r := syncResult(t, rep, "own"); !strings.Contains(r.Destination, f.CodeURL) {
		t.Errorf("destination = %s", r.Destination)
	}
	if out := testenv.Git(t, here.Dir, "branch", "--list", "env/own"); out != "" {
		t.Errorf("wrote a branch into the directory Sluice ran in")
	}
	if got := testenv.Git(t, filepath.Join(f.Git.Root, "code.git"), "ls-tree", "--name-only", "env/own", "apps/"); !strings.Contains(got, "apps/") {
		t.Errorf("the code repository has no env/own: %s", got)
	}
}

// TestGlobsOverSymlinkCyclesFailFast, as an attacker
// who pushes three links to "." where a RepoConfig's glob walks: the
// walk fails at once, naming the link, rather than for ever.
func TestGlobsOverSymlinkCyclesFailFast(t *testing.T) {
	f := testenv.NewPlatform(t)
	f.Code.Link(map[string]string{"deploy/sluice/loop/a": ".", "deploy/sluice/loop/b": ".", "deploy/sluice/loop/c": "."}).Commit("loops")
	f.Code.Push("main")
	rc := f.RepoConfig("rc.yaml", "")
	data, _ := os.ReadFile(rc)
	os.WriteFile(rc, []byte(strings.Replace(string(data), `globs: ["deploy/sluice/*.yaml"]`, `globs: ["deploy/**/*.yaml"]`, 1)), 0o644)
	cache, _ := engines(f)
	start := time.Now()
	_, err := Load(context.Background(), cache, []string{rc}, override.Set{})
	if err == nil || !strings.Contains(err.Error(), "deploy/sluice/loop/a") || !strings.Contains(err.Error(), "a cycle") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refused after %s", d)
	}
}

// TestFoundResourcesNameNoSecretAndSetNoTemplateUnlessAllowed: what a
// repository's author may not choose for the machine that reconciles
// it: which Secret it uses, and code (a pull request template) it runs.
func TestFoundResourcesNameNoSecretAndSetNoTemplateUnlessAllowed(t *testing.T) {
	f := testenv.NewPlatform(t)
	write := func(spec string) {
		f.Code.Write(f.Expand(map[string]string{"deploy/sluice/found.yaml": `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: found, labels: {env: dev}}
spec:
  source: {repo: ., path: deploy/overlays/dev}
` + spec})).Commit("found")
		f.Code.Push("main")
	}
	load := func(overrides string) error {
		cache, _ := engines(f)
		_, err := Load(context.Background(), cache, []string{f.RepoConfig("rc.yaml", overrides)}, override.Set{})
		return err
	}
	write("  destination: {repo: DEPLOY, branch: env/found, path: apps/found, secretRef: {name: deploy-token}}\n")
	if err := load(""); err == nil || !strings.Contains(err.Error(), "found.yaml") || !strings.Contains(err.Error(), "spec.destination.secretRef") || !strings.Contains(err.Error(), "spec.credentials") {
		t.Errorf("a found sync naming a Secret: %v", err)
	}
	// Nor another team's signing key.
	write("  destination: {repo: DEPLOY, branch: env/found, path: apps/found, signing: {secretRef: {name: team-b-signing}}}\n")
	if err := load(""); err == nil || !strings.Contains(err.Error(), "spec.destination.signing.secretRef") {
		t.Errorf("a found sync naming a signing Secret: %v", err)
	}
	write("  destination: {repo: DEPLOY, branch: env/found, path: apps/found, mode: pullRequest, pullRequest: {forge: gitea, title: '{{range 600}}{{printf \"%0999999d\" 1}}{{end}}'}}\n")
	if err := load(""); err == nil || !strings.Contains(err.Error(), "spec.destination.pullRequest.title") || !strings.Contains(err.Error(), "allowPullRequestTemplates: true") {
		t.Errorf("a found sync setting a template: %v", err)
	}
	if err := load("  allowPullRequestTemplates: true\n"); err != nil {
		t.Errorf("a template its RepoConfig allows: %v", err)
	}
}
