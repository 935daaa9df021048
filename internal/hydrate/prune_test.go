package hydrate

import (
	"context"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
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
	// What the prune asks of the destination's server, in order.
	var mu sync.Mutex
	var asked []string
	f.git.FailWith(func(r *http.Request) int {
		if strings.Contains(r.URL.Path, "/service-deploy.git/") {
			mu.Lock()
			asked = append(asked, r.Method+" "+path.Base(r.URL.Path)+" "+r.URL.Query().Get("service"))
			mu.Unlock()
		}
		return 0
	})
	if _, err := Prune(ctx, ms, o); err != nil {
		t.Fatal(err)
	}
	f.git.FailWith(nil)
	if got := f.dstGit("rev-parse", "env/dev"); got != tip {
		t.Errorf("another sync's folder was pruned: %s -> %s", tip, got)
	}
	// The prune built its removal on the tip it knew and tried to push it
	// (the receive-pack advertisement showed the branch had moved, and no
	// pack was sent), asked for the branch again, found the folder
	// web-next's and pushed nothing. (A prune returning at once asks
	// nothing; one removing the folder sends a pack.)
	mu.Lock()
	defer mu.Unlock()
	trail := strings.Join(asked, ", ")
	push := slices.Index(asked, "GET refs git-receive-pack")
	if push < 0 || !slices.Contains(asked[push:], "GET refs git-upload-pack") || slices.Contains(asked, "POST git-receive-pack ") {
		t.Errorf("the prune's requests: %s; want a push attempt on the stale tip, the branch asked for again after it, and no pack pushed", trail)
	}
}
