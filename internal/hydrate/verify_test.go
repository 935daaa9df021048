package hydrate

import (
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
)

// A takeover of a local tree is the developer's own work: a sync that
// asks for signed sources renders it unchecked, and its lock says so;
// the same sync from the remote is checked, and with no trusted keys it
// fails saying so.
func TestATakeoverOfALocalTreeIsNotVerifiedAndItsLockSaysSo(t *testing.T) {
	f := newFixture(t)
	verify := "  source: {repo: SRC, path: deploy/overlays/dev, verify: {secretRef: {name: keys}}}\n"
	body := strings.Replace(devSync, "  source: {repo: APP, ref: main, path: deploy/overlays/dev}\n", verify, 1)
	f.sync("web-dev", strings.Replace(body, "SRC", f.app.Dir, 1))
	rep := f.run(func(o *Options) {
		o.Takeover = &v1alpha1.Takeover{Owner: "alice@laptop", Expires: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	})
	if r := f.result(rep, "web-dev"); r.Result != Committed {
		t.Fatalf("the takeover: %s %s", r.Result, r.Error)
	}
	if prov := f.dstGit("show", "env/dev:apps/web/"+v1alpha1.ProvenanceFile); !strings.Contains(prov, "unverified: true") {
		t.Errorf("the lock does not say its tree was not checked:\n%s", prov)
	}

	f.sync("web-dev", strings.Replace(body, "SRC", f.appURL+", ref: main", 1))
	rep = f.run(func(o *Options) { o.Release, o.Steal = "alice@laptop", true })
	if r := f.result(rep, "web-dev"); r.Result != Failed || !strings.Contains(r.Error, "spec.source.verify") || !strings.Contains(r.Error, "no trusted keys") {
		t.Errorf("the remote source without trusted keys: %s %s", r.Result, r.Error)
	}
}
