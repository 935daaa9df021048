package hydrate

import (
	"context"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
)

// TestPruneRechecksTheFolderInsideThePush: a prune reads the folder,
// then pushes its removal; a takeover (or another sync) that claims the
// folder between the two is seen by the push's own edit, made again on
// the branch as the retry finds it, and the folder stays.
func TestPruneRechecksTheFolderInsideThePush(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	if r := f.result(f.run(), "web-dev"); r.Result != Committed {
		t.Fatalf("web-dev: %s %s", r.Result, r.Error)
	}
	set, err := config.Load(f.syncDir)
	if err != nil {
		t.Fatal(err)
	}
	ms := set.ManifestSyncs[0]
	ctx := context.Background()

	// The prune's clone is fetched now, before the lock lands: its first
	// attempt reads a folder nobody holds.
	o := f.options()
	if _, err := openDestinationRepo(ctx, ms, o); err != nil {
		t.Fatal(err)
	}
	locked := f.run(func(o *Options) {
		o.Takeover = &v1alpha1.Takeover{Owner: "alice@laptop", Expires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	})
	if r := f.result(locked, "web-dev"); r.Result != Committed {
		t.Fatalf("takeover: %s %s", r.Result, r.Error)
	}
	tip := f.dstGit("rev-parse", "env/dev")

	_, err = Prune(ctx, ms, o)
	if err == nil || !strings.Contains(err.Error(), "alice@laptop's takeover holds apps/web") {
		t.Fatalf("prune of a folder locked meanwhile: %v, want the lock named", err)
	}
	if got := f.dstGit("rev-parse", "env/dev"); got != tip {
		t.Fatalf("the branch moved under a takeover's lock: %s -> %s", tip, got)
	}

	// Released, the same sync's folder goes, in one commit; a second
	// prune finds nothing to do.
	if r := f.result(f.run(func(o *Options) { o.Release, o.Steal = "alice@laptop", true }), "web-dev"); r.Result != Committed {
		t.Fatalf("release: %s %s", r.Result, r.Error)
	}
	if _, err := Prune(ctx, ms, f.options()); err != nil {
		t.Fatal(err)
	}
	if out := f.dstGit("ls-tree", "-r", "--name-only", "env/dev"); strings.Contains(out, "apps/web/") {
		t.Fatalf("the folder is still there:\n%s", out)
	}
	tip = f.dstGit("rev-parse", "env/dev")
	if _, err := Prune(ctx, ms, f.options()); err != nil {
		t.Fatal(err)
	}
	if got := f.dstGit("rev-parse", "env/dev"); got != tip {
		t.Errorf("a prune of nothing committed: %s -> %s", tip, got)
	}
}

// TestPruneLeavesAFolderAnotherSyncClaimedMeanwhile: the folder became
// another sync's between the prune's read and its push: it stays.
func TestPruneLeavesAFolderAnotherSyncClaimedMeanwhile(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	if r := f.result(f.run(), "web-dev"); r.Result != Committed {
		t.Fatalf("web-dev: %s %s", r.Result, r.Error)
	}
	set, err := config.Load(f.syncDir)
	if err != nil {
		t.Fatal(err)
	}
	ms := set.ManifestSyncs[0]
	ctx := context.Background()
	o := f.options()
	if _, err := openDestinationRepo(ctx, ms, o); err != nil {
		t.Fatal(err)
	}
	// Someone removes the folder by hand and another sync takes the path.
	w := f.cloneDst("env/dev")
	testGit(t, w.Dir, "rm", "-r", "-q", "apps/web")
	w.Commit("hand the folder over")
	w.Push("env/dev")
	f.sync("web-dev", strings.Replace(devSync, "name: web-dev", "name: web-next", 1))
	if r := f.result(f.run(), "web-next"); r.Result != Committed {
		t.Fatalf("web-next: %s %s", r.Result, r.Error)
	}
	tip := f.dstGit("rev-parse", "env/dev")
	if _, err := Prune(ctx, ms, o); err != nil {
		t.Fatal(err)
	}
	if got := f.dstGit("rev-parse", "env/dev"); got != tip {
		t.Errorf("another sync's folder was pruned: %s -> %s", tip, got)
	}
}
