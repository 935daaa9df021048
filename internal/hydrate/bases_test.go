package hydrate

import (
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/testenv"
)

func TestParseRemoteBase(t *testing.T) {
	tests := []struct{ in, repo, ref, dir string }{
		{"https://git.example.com/org/repo//deploy/base?ref=v1", "https://git.example.com/org/repo", "v1", "deploy/base"},
		{"https://git.example.com/org/repo.git/deploy/base?version=main", "https://git.example.com/org/repo.git", "main", "deploy/base"},
		{"github.com/org/repo/deploy/base?ref=v2", "https://github.com/org/repo", "v2", "deploy/base"},
		{"git@github.com:org/repo.git/base", "git@github.com:org/repo.git", "", "base"},
		{"ssh://git@host/org/repo.git//base?ref=x", "ssh://git@host/org/repo.git", "x", "base"},
		{"file:///srv/repo//base", "file:///srv/repo", "", "base"},
		{"https://git.example.com/org/repo.git?ref=main", "https://git.example.com/org/repo.git", "main", ""},
	}
	for _, tt := range tests {
		repo, ref, dir, err := render.ParseRemoteBase(tt.in)
		if err != nil || repo != tt.repo || ref != tt.ref || dir != tt.dir {
			t.Errorf("%s: %q %q %q %v", tt.in, repo, ref, dir, err)
		}
	}
}

func TestRemoteBasesAreFetchedAndOverridden(t *testing.T) {
	f := newFixture(t)
	// A shared base in a platform repository, on main and on a branch.
	platform := f.git.CreateRepo(t, "platform")
	w := testenv.NewWork(t, platform)
	w.Write(map[string]string{"bases/web/kustomization.yaml": "resources: [cm.yaml]\n", "bases/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform}\ndata: {from: main}\n"}).Commit("main")
	w.Push("main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "alice/feature")
	w.Write(map[string]string{"bases/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform}\ndata: {from: feature}\n"}).Commit("feature")
	w.Push("alice/feature")
	f.app.Write(map[string]string{"deploy/remote/kustomization.yaml": "resources:\n- " + platform + "//bases/web?ref=main\n"}).Commit("remote base")
	f.app.Push("main")
	f.sync("remote", `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: remote}
spec:
  source: {repo: APP, ref: main, path: deploy/remote}
  destination: {repo: DST, branch: env/dev, path: apps/remote}
`)
	rep := f.run()
	if r := f.result(rep, "remote"); r.Err != nil || !strings.Contains(f.dstGit("show", "env/dev:apps/remote/configmap-platform.yaml"), "from: main") {
		t.Fatalf("remote base from main: %+v", r)
	}
	// The same sync, with the platform repository overridden to the
	// branch: the base comes from there.
	rep = f.run(func(o *Options) {
		o.Overrides = override.FromSpec(v1alpha1.Overrides{Repos: []v1alpha1.RepoOverride{{From: platform, To: platform + "?ref=alice/feature"}}}, "", "test")
	})
	if r := f.result(rep, "remote"); r.Err != nil || !strings.Contains(f.dstGit("show", "env/dev:apps/remote/configmap-platform.yaml"), "from: feature") {
		t.Fatalf("remote base overridden: %+v", r)
	}
}
