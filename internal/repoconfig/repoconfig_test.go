package repoconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// engines are fresh engines (a new run), sharing one registry client.
func engines(f *testenv.Platform) (*source.Cache, Options) {
	reg := registry.New()
	cache := source.NewCache(filepath.Join(f.Cache, "git"))
	return cache, Options{
		Builder: &build.Builder{Cache: cache, Registry: reg},
		Hydrate: hydrate.Options{Cache: cache, Registry: reg, Charts: &render.Charts{Registry: reg}, StateDir: f.Cache},
	}
}

func reconcile(t *testing.T, f *testenv.Platform, rcFile string) *Report {
	t.Helper()
	cache, o := engines(f)
	l, err := Load(context.Background(), cache, []string{rcFile}, override.Set{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Reconcile(context.Background(), l, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("%v\n%+v", err, rep)
	}
	return rep
}

func syncResult(t *testing.T, rep *Report, name string) hydrate.Result {
	t.Helper()
	for _, r := range rep.Syncs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", name, rep.Syncs)
	return hydrate.Result{}
}

func TestRepoConfigBuildsThenHydratesWhatItsSelectorsFind(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	rep := reconcile(t, f, rc)
	if len(rep.Images) != 2 || !rep.Images[0].Built || !rep.Images[1].Built {
		t.Fatalf("images: %+v", rep.Images)
	}
	if len(rep.Syncs) != 1 || rep.Syncs[0].Name != "apps-dev" || rep.Syncs[0].Result != hydrate.Committed {
		t.Fatalf("syncs (env: prod is not selected): %+v", rep.Syncs)
	}
	// The sync pinned the images built from the same commit.
	head := f.Code.Head()
	dep := f.Show("env/dev", "apps/deployment-guestbook.yaml")
	if !strings.Contains(dep, f.Reg.Host+"/team/guestbook:"+head+"@"+rep.Images[0].Digest) {
		t.Errorf("guestbook not pinned to the image just built (%s):\n%s", rep.Images[0].Digest, dep)
	}
	// Again: nothing to build, nothing to commit.
	rep = reconcile(t, f, rc)
	if rep.Images[0].Built || rep.Images[1].Built || rep.Syncs[0].Result != hydrate.Unchanged || rep.Changed() {
		t.Errorf("second reconcile: %+v %+v", rep.Images, rep.Syncs)
	}
}

func TestRepoConfigOverrideReachesEverySyncAndImageOfABranch(t *testing.T) {
	f := testenv.NewPlatform(t)
	reconcile(t, f, f.RepoConfig("rc.yaml", "")) // main deployed
	// Alice's branch changes the guestbook binary and the overlay.
	testenv.Git(t, f.Code.Dir, "checkout", "-q", "-b", "alice/feature")
	f.Code.Write(map[string]string{"bin/guestbook": "guestbook v2\n", "deploy/overlays/dev/banner.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: feature}\n"})
	branch := f.Code.Commit("feature")
	f.Code.Push("alice/feature")

	// The RepoConfig points at the branch: its syncs, which name main,
	// follow, and the images built carry the branch's commit.
	rep := reconcile(t, f, f.RepoConfig("branch.yaml", "  overrides:\n    repos:\n    - {from: CODE, to: \"CODE?ref=alice/feature\"}\n"))
	if r := syncResult(t, rep, "apps-dev"); r.Result != hydrate.Committed || !strings.Contains(r.Source, branch[:7]) {
		t.Fatalf("apps-dev: %+v", r)
	}
	if !strings.Contains(f.Show("env/dev", "apps/configmap-banner.yaml"), "text: feature") {
		t.Error("the overlay was not read from the branch")
	}
	var gb build.Result
	for _, i := range rep.Images {
		if i.Name == "guestbook" {
			gb = i
		}
	}
	if !gb.Built || gb.Tags[0] != branch {
		t.Fatalf("guestbook: %+v", gb)
	}
	if dep := f.Show("env/dev", "apps/deployment-guestbook.yaml"); !strings.Contains(dep, ":"+branch+"@"+gb.Digest) {
		t.Errorf("guestbook pinned to something else than the branch's image:\n%s", dep)
	}
	// The worker's files did not change on the branch: only tagged.
	for _, i := range rep.Images {
		if i.Name == "worker" && i.Built {
			t.Error("worker was rebuilt though its files did not change")
		}
	}
}

func TestRepoConfigErrorsNameTheFileAndField(t *testing.T) {
	f := testenv.NewPlatform(t)
	tests := []struct {
		name, spec, want string
	}{
		{"glob matching nothing", "", `spec.globs[1]: "nothing/*.yaml" matches no file`},
		{"override of no repository", "  overrides:\n    repos: [{from: https://git.example.com/other.git, to: /tmp}]\n", "RepoConfig platform: spec.overrides.repos[0].from: https://git.example.com/other.git is the repository of no resource found"},
		{"invalid deployment tag", "  overrides:\n    images: [{name: REG/team/*, tag: \"-bad\"}]\n", "spec.overrides.images[0].tag: Invalid value"},
		{"unknown field", "  overides: {}\n", `spec.overides: unknown field; did you mean "overrides"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := f.RepoConfig("bad.yaml", tt.spec)
			if tt.name == "glob matching nothing" {
				p = f.RepoConfig("bad.yaml", "")
				data := strings.Replace(readFile(t, p), `globs: ["deploy/sluice/*.yaml"]`, `globs: ["deploy/sluice/*.yaml", "nothing/*.yaml"]`, 1)
				writeFile(t, p, data)
			}
			cache, _ := engines(f)
			_, err := Load(context.Background(), cache, []string{p}, override.Set{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "bad.yaml:") {
				t.Errorf("got %v\nwant %q", err, tt.want)
			}
		})
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
