package controller

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clones is how many clones a controller's cache holds: a controller that
// never reconciled holds none.
func clones(dir string) int {
	entries, _ := os.ReadDir(filepath.Join(dir, "git"))
	n := 0
	for _, en := range entries {
		if en.IsDir() {
			n++
		}
	}
	return n
}

// Two replicas with leader election: one reconciles, the other waits on
// the Lease and never touches a repository; when the leader stops, the
// other takes over and goes on.
func TestTwoReplicasOneWriter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := "sluice-" + e.shard
	dirs := []string{t.TempDir(), t.TempDir()}
	stops := make([]func(), 2)
	for i := range 2 {
		_, stops[i] = e.start(func(o *Options) {
			o.CacheDir, o.LeaderElection, o.LeaderElectionNamespace, o.LeaderElectionID = dirs[i], true, e.ns, id
		})
	}
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 60*time.Second)
	lease := &coordinationv1.Lease{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: id}, lease); err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("no Lease held: %v", err)
	}
	leader := -1
	for i, d := range dirs {
		if clones(d) > 0 {
			if leader >= 0 {
				t.Fatal("both replicas reconciled")
			}
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no replica reconciled")
	}
	other := 1 - leader
	stops[leader]()
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}).Commit("cm")
	e.app.Push("main")
	e.requestReconcile(e.sync("web"), "after-failover")
	ms := e.ready("web", metav1.ConditionTrue, 60*time.Second)
	if ms.Status.Source.Commit != e.app.Head() || clones(dirs[other]) == 0 {
		t.Fatalf("after the leader stopped: source %s (want %s), the other replica's clones %d", ms.Status.Source.Commit, e.app.Head(), clones(dirs[other]))
	}
}

// Two shards (as Flux shards: a label selector per controller) writing
// one destination branch: every sync lands, none is lost, nothing is
// forced. The shards are made to race: the first push waits on the git
// server until the other shard's push arrives, built on the same tip.
func TestTwoShardsOneBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.tip("main")
	var pushes atomic.Int64
	both := make(chan struct{})
	var once sync.Once
	hook := func(r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/deploy.git/git-receive-pack") {
			return
		}
		if pushes.Add(1) == 2 {
			once.Do(func() { close(both) })
		}
		select {
		case <-both:
		case <-time.After(20 * time.Second):
		}
	}
	e.hook.Store(&hook)
	for _, shard := range []string{"a", "b"} {
		e.start(func(o *Options) {
			o.WatchLabelSelector = "sluice.dev/test=" + e.shard + ",sharding.sluice.dev/key=" + shard
		})
	}
	const n = 20
	for i := range n {
		shard := []string{"a", "b"}[i%2]
		e.apply(fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata:
  name: web-%d
  labels: {sharding.sluice.dev/key: %s}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/dev, path: apps/web-%d}
  interval: 1h
`, i, shard, i))
	}
	commits := map[string]bool{}
	for i := range n {
		ms := e.ready(fmt.Sprintf("web-%d", i), metav1.ConditionTrue, 60*time.Second)
		commits[ms.Status.Destination.Commit] = true
	}
	tip := e.tip("env/dev")
	for c := range commits {
		if e.dst("cat-file", "-t", c) != "commit" {
			t.Errorf("commit %s is not in the destination", c)
		}
		if out := e.dst("rev-list", tip+".."+c); out != "" {
			t.Errorf("commit %s is not an ancestor of the tip %s (lost): %s", c, tip, out)
		}
	}
	tree := e.dst("ls-tree", "--name-only", "env/dev:apps")
	if got := len(strings.Fields(tree)); got != n {
		t.Errorf("env/dev holds %d folders, want %d:\n%s", got, n, tree)
	}
	// History is linear from main's commit: nothing was forced over.
	if log := e.dst("rev-list", "--first-parent", "env/dev"); !strings.Contains(log, before) {
		t.Errorf("env/dev does not descend from main's %s", before)
	}
	if merges := e.dst("rev-list", "--merges", "env/dev"); merges != "" {
		t.Errorf("merge commits on env/dev: %s", merges)
	}
	// They raced: two pushes on one tip, the loser's redone on the
	// winner's commit.
	if len(commits) < 2 || pushes.Load() < 3 {
		t.Errorf("the shards did not race: %d commits, %d pushes", len(commits), pushes.Load())
	}
}
