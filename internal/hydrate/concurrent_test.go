package hydrate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"sluice.dev/sluice/internal/config"
)

// TestRunsSharingACacheBothLand: two runs at once, as two processes
// would (each its own Cache on the same directory), hydrating the same
// source into one branch while the source moves: both land.
func TestRunsSharingACacheBothLand(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 8; i++ {
		f.sync(fmt.Sprintf("s%d", i), strings.NewReplacer("NAME", fmt.Sprintf("s%d", i)).Replace(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: NAME}
spec:
  source: {repo: APP, ref: main, path: deploy/overlays/dev}
  destination: {repo: DST, branch: env/dev, path: apps/NAME}
`))
	}
	set, err := config.Load(f.syncDir)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		// The source moves between rounds: each run fetches new objects
		// into the shared clones while the other reads them.
		f.app.Write(map[string]string{"deploy/overlays/dev/replicas.yaml": fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: %d}\n", round+3)}).Commit(fmt.Sprint("round ", round))
		f.app.Push("main")
		var wg sync.WaitGroup
		reports := make([]*Report, 2)
		errs := make([]error, 2)
		for i := range reports {
			wg.Add(1)
			go func() {
				defer wg.Done()
				syncs := set.ManifestSyncs[i*4 : i*4+4]
				reports[i], errs[i] = Run(context.Background(), syncs, f.options())
			}()
		}
		wg.Wait()
		for i, rep := range reports {
			if errs[i] != nil {
				t.Fatalf("round %d run %d: %v", round, i, errs[i])
			}
			for _, r := range rep.Results {
				if r.Result != Committed {
					t.Errorf("round %d run %d: %s %s %s", round, i, r.Name, r.Result, r.Error)
				}
			}
		}
	}
	for i := 0; i < 8; i++ {
		if got := f.dstGit("show", fmt.Sprintf("env/dev:apps/s%d/deployment-web.yaml", i)); !strings.Contains(got, "replicas: 5") {
			t.Errorf("s%d:\n%s", i, got)
		}
	}
}
