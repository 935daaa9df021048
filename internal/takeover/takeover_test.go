package takeover

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/repoconfig"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// options are fresh engines (a new run) for a takeover of the platform's
// RepoConfig.
func options(f *testenv.Platform, rc string) Options {
	reg := registry.New()
	cache := source.NewCache(filepath.Join(f.Cache, "git"))
	return Options{
		Paths: []string{rc}, Cache: cache,
		Builder: &build.Builder{Cache: cache, Registry: reg},
		Hydrate: hydrate.Options{Cache: cache, Registry: reg, Charts: &render.Charts{Registry: reg}, StateDir: f.Cache},
	}
}

func take(t *testing.T, o Options) *repoconfig.Report {
	t.Helper()
	rep, err := Take(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// regular runs the regular deployment (what the controller would).
func regular(t *testing.T, f *testenv.Platform, rc string, now time.Time) *repoconfig.Report {
	t.Helper()
	o := options(f, rc)
	l, err := repoconfig.Load(context.Background(), o.Cache, o.Paths, override.Set{})
	if err != nil {
		t.Fatal(err)
	}
	o.Hydrate.Now = func() time.Time { return now }
	rep, err := repoconfig.Reconcile(context.Background(), l, repoconfig.Options{Hydrate: o.Hydrate, Builder: o.Builder})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func sync(t *testing.T, rep *repoconfig.Report) hydrate.Result {
	t.Helper()
	if len(rep.Syncs) != 1 {
		t.Fatalf("syncs: %+v", rep.Syncs)
	}
	return rep.Syncs[0]
}

func image(rep *repoconfig.Report, name string) (build.Result, bool) {
	for _, i := range rep.Images {
		if i.Name == name {
			return i, true
		}
	}
	return build.Result{}, false
}

func TestTakeoverFromADirtyTreeRebuildsOneImageAndLocks(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	now := time.Now()
	main := regular(t, f, rc, now) // main deployed: both images built, tagged with main's commit
	mainWorker, _ := image(main, "worker")
	mainHead := f.Code.Head()
	codeRefs := testenv.Git(t, filepath.Join(f.Git.Root, "code.git"), "show-ref")

	// Alice edits her working tree and does not commit.
	f.Code.Write(map[string]string{
		"bin/guestbook":                   "guestbook, uncommitted\n",
		"deploy/overlays/dev/banner.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: alice}\n",
	})
	o := options(f, rc)
	o.Local, o.Build, o.Tag, o.Owner, o.For = []string{f.Code.Dir}, []string{"guestbook"}, "dev-alice", "alice@laptop", time.Hour
	o.Now = func() time.Time { return now }
	rep := take(t, o)
	gb, built := image(rep, "guestbook")
	if !built || !gb.Built || !strings.HasSuffix(gb.Source, "+dirty") || strings.Join(gb.Tags, ",") != "dev-alice" {
		t.Fatalf("guestbook: %+v", gb)
	}
	if _, ok := image(rep, "worker"); ok {
		t.Error("worker was built though not asked for")
	}
	// The others are only tagged with the deployment tag, at the digest
	// their own tag resolves to.
	if len(rep.Retagged) != 1 || rep.Retagged[0].Name != "worker" || rep.Retagged[0].Digest != mainWorker.Digest || rep.Retagged[0].Source != mainHead {
		t.Errorf("retagged: %+v", rep.Retagged)
	}
	if r := sync(t, rep); r.Result != hydrate.Committed {
		t.Fatalf("sync: %+v", r)
	}
	// Both follow the deployment tag: guestbook at its new build, worker
	// at the digest it had.
	if dep := f.Show("env/dev", "apps/deployment-guestbook.yaml"); !strings.Contains(dep, "guestbook:dev-alice@"+gb.Digest) {
		t.Errorf("guestbook:\n%s", dep)
	}
	if dep := f.Show("env/dev", "apps/deployment-worker.yaml"); !strings.Contains(dep, "worker:dev-alice@"+mainWorker.Digest) {
		t.Errorf("worker:\n%s", dep)
	}
	if !strings.Contains(f.Show("env/dev", "apps/configmap-banner.yaml"), "text: alice") {
		t.Error("the uncommitted overlay change is not what was hydrated")
	}
	prov := f.Show("env/dev", "apps/.sluice.yaml")
	for _, want := range []string{"takeover:", "owner: alice@laptop", "commit: " + mainHead, "diff: ", "tag: dev-alice", "expires: \"" + now.Add(time.Hour).UTC().Format(time.RFC3339) + "\"", "dirty: true"} {
		if !strings.Contains(prov, want) {
			t.Errorf("provenance lacks %q:\n%s", want, prov)
		}
	}
	if got := testenv.Git(t, filepath.Join(f.Git.Root, "code.git"), "show-ref"); got != codeRefs {
		t.Errorf("the takeover pushed to the code repository:\n%s", got)
	}

	// While the lock holds, the regular deployment skips the folder...
	if r := sync(t, regular(t, f, rc, now.Add(30*time.Minute))); r.Result != hydrate.Locked || r.Lock.Owner != "alice@laptop" {
		t.Errorf("regular run under the lock: %+v", r)
	}
	// ...and Bob's takeover is refused, naming Alice and the expiry.
	ob := options(f, rc)
	ob.Local, ob.Owner, ob.Tag = []string{f.Code.Dir}, "bob@desk", "dev-bob"
	ob.Now = func() time.Time { return now.Add(30 * time.Minute) }
	r := sync(t, take(t, ob))
	if r.Result != hydrate.Failed || !strings.Contains(r.Error, "taken over by alice@laptop until "+now.Add(time.Hour).UTC().Format(time.RFC3339)) {
		t.Errorf("bob's takeover: %+v", r)
	}
	// Alice runs it again (the lock is hers): fine.
	o.Build = nil
	if r := sync(t, take(t, o)); r.Result == hydrate.Failed || r.Result == hydrate.Locked {
		t.Errorf("alice again: %+v", r)
	}
	// Once it expired, the regular deployment takes the folder back.
	r = sync(t, regular(t, f, rc, now.Add(2*time.Hour)))
	if r.Result != hydrate.Committed || strings.Contains(f.Show("env/dev", "apps/.sluice.yaml"), "takeover:") || !strings.Contains(f.Show("env/dev", "apps/configmap-banner.yaml"), "text: main") {
		t.Errorf("after expiry: %+v", r)
	}
}

func TestStealAndRelease(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	regular(t, f, rc, time.Now())
	f.Code.Write(map[string]string{"deploy/overlays/dev/banner.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: local}\n"})
	o := options(f, rc)
	o.Local, o.Owner = []string{f.Code.Dir}, "alice@laptop"
	take(t, o)
	ob := options(f, rc)
	ob.Local, ob.Owner, ob.Steal = []string{f.Code.Dir}, "bob@desk", true
	if r := sync(t, take(t, ob)); r.Result != hydrate.Committed || !strings.Contains(f.Show("env/dev", "apps/.sluice.yaml"), "owner: bob@desk") {
		t.Fatalf("steal: %+v", r)
	}
	// Alice cannot release Bob's takeover...
	oa := options(f, rc)
	oa.Owner = "alice@laptop"
	rep, err := Release(context.Background(), oa)
	if err != nil {
		t.Fatal(err)
	}
	if r := sync(t, rep); r.Result != hydrate.Locked {
		t.Errorf("alice releasing bob's: %+v", r)
	}
	// ...Bob can.
	ob = options(f, rc)
	ob.Owner = "bob@desk"
	if rep, err = Release(context.Background(), ob); err != nil {
		t.Fatal(err)
	}
	if r := sync(t, rep); r.Result != hydrate.Committed || strings.Contains(f.Show("env/dev", "apps/.sluice.yaml"), "takeover:") || !strings.Contains(f.Show("env/dev", "apps/configmap-banner.yaml"), "text: main") {
		t.Errorf("bob's release: %+v", r)
	}
}

func TestAMovedDeploymentTagRehydratesWithoutANewCommit(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	regular(t, f, rc, time.Now())
	o := options(f, rc)
	o.Local, o.Owner, o.Tag, o.Build = []string{f.Code.Dir}, "alice@laptop", "dev-alice", []string{"worker"}
	take(t, o)
	before := f.Show("env/dev", "apps/deployment-worker.yaml")
	// Alice rebuilds the worker alone, under her tag (sluice build --tag).
	f.Code.Write(map[string]string{"bin/worker": "worker v2\n"})
	b := options(f, rc)
	l, err := repoconfig.Load(context.Background(), b.Cache, b.Paths, override.Set{Repos: []override.Repo{mustLocal(t, f.Code.Dir)}})
	if err != nil {
		t.Fatal(err)
	}
	imgs, _ := repoconfig.Select(l.Set.Images, []string{"worker"})
	res := b.Builder.Build(context.Background(), imgs, build.Options{Tags: []string{"dev-alice"}})
	if res[0].Err != nil || !res[0].Built {
		t.Fatalf("rebuild: %+v", res[0])
	}
	// The next takeover run builds nothing, reads the same sources, and
	// re-pins the worker to the tag's new digest.
	o2 := options(f, rc)
	o2.Local, o2.Owner, o2.Tag = []string{f.Code.Dir}, "alice@laptop", "dev-alice"
	rep := take(t, o2)
	after := f.Show("env/dev", "apps/deployment-worker.yaml")
	if len(rep.Images) != 0 || after == before || !strings.Contains(after, "worker:dev-alice@"+res[0].Digest) {
		t.Errorf("after the tag moved (images %+v):\n%s", rep.Images, after)
	}
}

func mustLocal(t *testing.T, dir string) override.Repo {
	t.Helper()
	r, err := override.Local(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBadTakeoverInput(t *testing.T) {
	f := testenv.NewPlatform(t)
	rc := f.RepoConfig("rc.yaml", "")
	tests := []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Tag = "not a tag" }, "--tag: \"not a tag\" is not a valid image tag"},
		{func(o *Options) { o.For = 13 * time.Hour }, "a takeover lasts at most 12h0m0s"},
		{func(o *Options) { o.Build = []string{"nope"} }, "no Image named nope (found: guestbook, worker)"},
		{func(o *Options) { o.Overrides = []string{"https://git.example.com/other.git=/tmp"} }, "--override-repo https://git.example.com/other.git=/tmp.from: https://git.example.com/other.git is the repository of no resource found"},
		{func(o *Options) { o.Local = []string{t.TempDir()} }, "not in a git working tree"},
	}
	for _, tt := range tests {
		o := options(f, rc)
		tt.mod(&o)
		if _, err := Take(context.Background(), o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v\nwant %q", err, tt.want)
		}
	}
}
