package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/testenv"
)

// The syncs of one destination repository that come due together are
// one batch, whatever their branches: a source's syncs usually go to a
// branch per environment, and its renders then follow each other in its
// warm worker instead of being spread over a batch per branch. A batch
// holds maxBatch syncs at most; the rest are the next.
func TestSyncsOfOneRepositoryAreOneBatchAcrossBranches(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	src := srv.CreateRepo(t, "src")
	w := testenv.NewWork(t, src)
	files := map[string]string{}
	for a := range 6 {
		files[fmt.Sprintf("app%d/cm.yaml", a)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app%d}\ndata: {v: '%d'}\n", a, a)
	}
	w.Write(files).Commit("apps")
	w.Push("main")
	dst := srv.CreateRepo(t, "deploy")

	defer func(n int) { maxBatch = n }(maxBatch)
	maxBatch = 4
	e := newEngines(t.TempDir(), 0, nil, render.Limits{}, nil, nil, 0)
	b := newBatcher(ctx, e, 4, slog.New(slog.DiscardHandler))
	before := batchesObserved(t)

	var wg sync.WaitGroup
	results := make([]hydrate.Result, 6)
	errs := make([]error, 6)
	for a := range 6 {
		ms := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("app%d", a)}}
		ms.Spec.Source = v1alpha1.Source{Repo: src, Ref: "main", Path: fmt.Sprintf("app%d", a)}
		ms.Spec.Destination = v1alpha1.Destination{Repo: dst, Branch: fmt.Sprintf("env-%d", a%3), Path: fmt.Sprintf("apps/app%d", a)}
		ms.Default()
		j := &job{ms: config.ManifestSync{ManifestSync: ms}, reg: e.registry("anonymous", nil)}
		wg.Go(func() { results[a], errs[a] = b.submit(ctx, j) })
	}
	wg.Wait()
	for a := range 6 {
		if errs[a] != nil || results[a].Err != nil || results[a].Result != hydrate.Committed {
			t.Fatalf("sync app%d: %v, %+v", a, errs[a], results[a])
		}
	}
	// 6 syncs into 3 branches of one repository, at most 4 a batch: 2
	// batches (by branch: 3; unbounded: 1).
	if got := batchesObserved(t) - before; got != 2 {
		t.Errorf("6 syncs into 3 branches of one repository ran in %d batches, want 2 (4 and 2)", got)
	}
}

// batchesObserved is how many batches the controller's metric counted.
func batchesObserved(t *testing.T) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := batchSize.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
