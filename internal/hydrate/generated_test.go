package hydrate

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"sluice.dev/sluice/internal/synckey"
)

const leakSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: leak}
spec:
  source: {repo: APP, ref: main, path: charts/leak}
  render:
    helm: {releaseName: leak, namespace: apps ALLOW}
  images: [{name: REG/team/*}]
  destination: {repo: DST, branch: env/dev, path: apps/leak, secrets: plaintext}
`

// A value the chart generates from the sync key, anywhere but in a
// Secret's data, fails the sync naming the object, field and template,
// before anything leaves: an image reference holding one is never sent
// to its registry, and nothing is committed. The setting named for it
// commits it readable.
func TestAGeneratedValueOutsideASecretIsRefusedBeforeAnythingLeaves(t *testing.T) {
	f := newFixture(t)
	f.app.Write(f.expand(map[string]string{
		"charts/leak/Chart.yaml":            "apiVersion: v2\nname: leak\nversion: 1.0.0\n",
		"charts/leak/templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: pw}\nstringData: {pw: {{ randAlphaNum 32 }}}\n",
		"charts/leak/templates/pod.yaml":    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: REG/team/web:{{ randAlphaNum 20 | lower }}}]\n",
	})).Commit("leak")
	f.app.Push("main")
	var mu sync.Mutex
	var paths []string
	f.reg.FailWith(func(r *http.Request) int {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		return 0
	})
	withKey := func(o *Options) { o.SyncKey = synckey.New() }
	f.sync("leak", strings.Replace(leakSync, " ALLOW", "", 1))
	r := f.result(f.run(withKey), "leak")
	if r.Err == nil {
		t.Fatalf("committed: %+v", r)
	}
	for _, want := range []string{"Pod/apps/p (from leak/templates/pod.yaml)", "spec.containers[0].image", "template leak/templates/pod.yaml, randAlphaNum", "generatedValuesOutsideSecrets"} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, r.Err)
		}
	}
	mu.Lock()
	asked := strings.Join(paths, "\n")
	mu.Unlock()
	if strings.Contains(asked, "/manifests/") {
		t.Errorf("the registry was asked for the image:\n%s", asked)
	}
	if out := f.dstGit("branch", "--list", "env/dev"); out != "" {
		t.Errorf("committed: %s", out)
	}
	// Allowed, it is pinned (the tag does not exist: the error says so)
	// and would be committed readable.
	f.sync("leak", strings.Replace(leakSync, " ALLOW", ", generatedValuesOutsideSecrets: true", 1))
	r = f.result(f.run(withKey), "leak")
	if r.Err == nil || strings.Contains(r.Err.Error(), "generatedValuesOutsideSecrets") {
		t.Errorf("allowed: %v", r.Err)
	}
}
