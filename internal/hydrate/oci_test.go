package hydrate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/testenv"
)

const ociDevSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web-dev}
spec:
  source: {repo: APP, ref: main, path: deploy/overlays/dev}
  images:
  - name: REG/team/*
    tag: dev
  destination: {repo: oci://REG/team/deploy, tag: dev, path: apps/web}
`

const ociShopSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: shop-dev}
spec:
  source: {repo: APP, ref: main, path: charts/shop}
  render:
    helm: {releaseName: shop}
  images:
  - name: REG/team/shop
  destination: {repo: oci://REG/team/deploy, tag: dev, path: apps/shop}
`

func (f *fixture) artifact(t *testing.T, tag string) (map[string][]byte, string) {
	t.Helper()
	ref, err := name.NewTag(f.reg.Host+"/team/deploy:"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	files, _, digest, found, err := ociartifact.Read(context.Background(), ref, ociartifact.DefaultLimits())
	if err != nil || !found {
		t.Fatalf("reading %s: found %v, %v", ref, found, err)
	}
	return files, digest.String()
}

// Syncs whose destination is an OCI repository and tag land together as
// one artifact: each folder with its provenance record, images pinned,
// the tag moved to it; a run with nothing new pushes nothing; a changed
// source pushes a new artifact with both folders; the result names the
// digest.
func TestSyncsLandInOneOCIArtifact(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", ociDevSync)
	f.sync("shop-dev", ociShopSync)
	// A third sync of the tag: whichever reads the artifact first, each
	// writes through it.
	f.sync("web-prod", strings.NewReplacer("web-dev", "web-prod", "overlays/dev", "overlays/prod", "apps/web", "apps/web-prod", "tag: dev\n  destination", "tag: prod\n  destination").Replace(ociDevSync))
	rep := f.run()
	web, shop := f.result(rep, "web-dev"), f.result(rep, "shop-dev")
	if web.Result != Committed || shop.Result != Committed || web.Commit != shop.Commit || !strings.HasPrefix(web.Commit, "sha256:") {
		t.Fatalf("first run: %+v\n%+v", web, shop)
	}
	files, digest := f.artifact(t, "dev")
	if digest != web.Commit {
		t.Errorf("the tag is at %s, the result says %s", digest, web.Commit)
	}
	if p := f.result(rep, "web-prod"); p.Result != Committed || p.Commit != web.Commit {
		t.Errorf("the third sync of the tag: %+v", p)
	}
	for _, want := range []string{"apps/web/.sluice.yaml", "apps/web/deployment-web.yaml", "apps/shop/.sluice.yaml", "apps/shop/deployment-shop.yaml", "apps/web-prod/deployment-web.yaml"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the artifact lacks %s; it holds %v", want, keys(files))
		}
	}
	if !strings.Contains(string(files["apps/web/deployment-web.yaml"]), f.digests["web:dev"]) {
		t.Errorf("the web image is not pinned in the artifact:\n%s", files["apps/web/deployment-web.yaml"])
	}
	// Beside the moving tag, the hydration's own: the tag, the source
	// commit, the content's digest.
	layerDigest := func(d string) string {
		ref, _ := name.NewDigest(f.reg.Host+"/team/deploy@"+d, name.Insecure)
		img, err := remote.Image(ref)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := img.Manifest()
		return m.Layers[0].Digest.Hex[:12]
	}
	immutable, _ := name.NewTag(f.reg.Host+"/team/deploy:dev-"+f.app.Head()[:12]+"-"+layerDigest(digest), name.Insecure)
	if d, err := remote.Head(immutable); err != nil || d.Digest.String() != digest {
		t.Errorf("the hydration's own tag %s: %v %v", immutable.TagStr(), d, err)
	}
	if web.Destination != "oci://"+f.reg.Host+"/team/deploy dev apps/web" {
		t.Errorf("the result's destination: %q", web.Destination)
	}

	uploads := f.reg.Uploads.Load()
	rep = f.run()
	if r := f.result(rep, "web-dev"); r.Result != Unchanged || r.Commit != digest || f.reg.Uploads.Load() != uploads {
		t.Errorf("a run with nothing new: %+v, %d uploads", r, f.reg.Uploads.Load()-uploads)
	}

	f.app.Write(map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n"}).Commit("five")
	f.app.Push("main")
	rep = f.run()
	web = f.result(rep, "web-dev")
	if web.Result != Committed || web.Commit == digest {
		t.Fatalf("after a change: %+v", web)
	}
	files, digest2 := f.artifact(t, "dev")
	if digest2 != web.Commit || !strings.Contains(string(files["apps/web/deployment-web.yaml"]), "replicas: 5") || files["apps/shop/deployment-shop.yaml"] == nil {
		t.Errorf("the new artifact %s (result %s): %v", digest2, web.Commit, keys(files))
	}
}

// A tag that points at an artifact Sluice did not push is not moved: the
// syncs fail naming the digest found, and the tag stays.
func TestAnOCIDestinationTagSluiceDidNotPushIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	theirs := f.reg.PushImage(t, "team/deploy:dev", img)
	f.sync("web-dev", ociDevSync)
	r := f.result(f.run(), "web-dev")
	if r.Result != Failed || !strings.Contains(r.Error, theirs) || !strings.Contains(r.Error, "which Sluice did not push") {
		t.Errorf("writing over someone else's tag: %+v", r)
	}
	ref, _ := name.NewTag(f.reg.Host+"/team/deploy:dev", name.Insecure)
	if d, err := remote.Head(ref); err != nil || d.Digest.String() != theirs {
		t.Errorf("the tag moved to %v (%v)", d, err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// With a key, each artifact is signed and carries its SLSA provenance
// before its tag moves: the real cosign verify and verify-attestation
// accept both, and the provenance names the syncs, the source commit and
// every pinned image digest.
func TestAnOCIArtifactIsSignedWithItsProvenance(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	gen := exec.Command(testenv.CosignBinary(t), "generate-key-pair")
	gen.Dir, gen.Env = dir, append(os.Environ(), "COSIGN_PASSWORD=pw")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "cosign.key"))
	key, err := artifactsig.ParseKey(data, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	f.sync("web-dev", ociDevSync)
	r := f.result(f.run(func(o *Options) {
		o.ArtifactSigner, o.Version = artifactsig.CosignKey(key, "the test key"), "v0.1.0-test"
	}), "web-dev")
	if r.Result != Committed {
		t.Fatalf("%+v", r)
	}
	ref, pub := f.reg.Host+"/team/deploy@"+r.Commit, filepath.Join(dir, "cosign.pub")
	if _, err := testenv.CosignVerify(t, ref, "", nil, "--key", pub, "--insecure-ignore-tlog"); err != nil {
		t.Error(err)
	}
	payload, err := testenv.CosignVerify(t, ref, "slsaprovenance1", nil, "--key", pub, "--insecure-ignore-tlog")
	if err != nil {
		t.Fatal(err)
	}
	commit := f.app.Head()
	for _, want := range []string{`"name":"web-dev"`, `"folder":"apps/web"`, `"gitCommit":"` + commit, strings.TrimPrefix(f.digests["web:dev"], "sha256:"), `"sluice":"v0.1.0-test"`, `"deploy/overlays/dev"`} {
		if !strings.Contains(payload, want) {
			t.Errorf("the provenance lacks %s:\n%s", want, payload)
		}
	}
}

// spec.prune in an OCI destination: the deleted sync's folder leaves the
// artifact (the other syncs' stay), in a new artifact the tag moves to; a
// folder that is no longer the sync's is left alone, and so is an
// artifact that holds none; a leader that lost its Lease (TagGuard)
// moves no tag.
func TestPruneRemovesTheFolderFromTheArtifact(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", ociDevSync)
	f.sync("shop-dev", ociShopSync)
	f.run()
	_, before := f.artifact(t, "dev")
	set, err := config.Load(f.syncDir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]config.ManifestSync{}
	for _, ms := range set.ManifestSyncs {
		byName[ms.Name] = ms
	}
	ctx := context.Background()

	// Not the sync's folder: another sync of the same destination.
	other := byName["web-dev"]
	other.ManifestSync = other.ManifestSync.DeepCopy()
	other.Name = "web-old"
	if _, err := Prune(ctx, other, f.options()); err != nil {
		t.Fatal(err)
	}
	if _, d := f.artifact(t, "dev"); d != before {
		t.Error("another sync pruned the folder")
	}

	// The leader lost its Lease: nothing moves.
	o := f.options()
	o.TagGuard = func(context.Context) error { return errors.New("no longer the leader") }
	if _, err := Prune(ctx, byName["web-dev"], o); err == nil || !strings.Contains(err.Error(), "no longer the leader") {
		t.Errorf("a prune past a refusing guard: %v", err)
	}
	if _, d := f.artifact(t, "dev"); d != before {
		t.Error("the tag moved past the guard")
	}

	if _, err := Prune(ctx, byName["web-dev"], f.options()); err != nil {
		t.Fatal(err)
	}
	files, after := f.artifact(t, "dev")
	if after == before {
		t.Fatal("the tag did not move")
	}
	for p := range files {
		if strings.HasPrefix(p, "apps/web/") {
			t.Errorf("%s is still in the artifact", p)
		}
	}
	if files["apps/shop/.sluice.yaml"] == nil {
		t.Error("the other sync's folder went too")
	}
	// Again: nothing to prune, nothing pushed.
	if _, err := Prune(ctx, byName["web-dev"], f.options()); err != nil {
		t.Fatal(err)
	}
	if _, d := f.artifact(t, "dev"); d != after {
		t.Error("a second prune pushed")
	}
}

// A registry that fails in the middle of a push (a blob upload refused,
// or 429 when the tag is to move): the sync fails naming the registry's
// answer and the tag stays where it was; once the registry serves again,
// the next run lands the change.
func TestARegistryFailingMidPushMovesNoTag(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", ociDevSync)
	f.run()
	_, before := f.artifact(t, "dev")
	f.app.Write(map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 9}\n"}).Commit("nine")
	f.app.Push("main")
	write := func(r *http.Request) bool {
		return r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodPatch
	}
	for _, c := range []struct {
		name string
		fail func(*http.Request) int
		want string
	}{
		{"a blob upload refused", func(r *http.Request) int {
			if write(r) && strings.Contains(r.URL.Path, "/blobs/") {
				return http.StatusServiceUnavailable
			}
			return 0
		}, "503"},
		{"429 at the tag", func(r *http.Request) int {
			if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/manifests/dev") {
				return http.StatusTooManyRequests
			}
			return 0
		}, "429"},
		// Every other tag goes before the environment's: a failure there
		// leaves the environment's where it was.
		{"the immutable tag refused", func(r *http.Request) int {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/dev-") {
				return http.StatusServiceUnavailable
			}
			return 0
		}, "503"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.reg.FailWith(c.fail)
			defer f.reg.FailWith(nil)
			r := f.result(f.run(), "web-dev")
			if r.Err == nil || !strings.Contains(r.Err.Error(), c.want) {
				t.Errorf("the sync: %+v, want a failure naming %s", r, c.want)
			}
			if _, d := f.artifact(t, "dev"); d != before {
				t.Errorf("the tag moved to %s", d)
			}
		})
	}
	// A registry that does not accept Flux's config media type: the
	// registry's answer is said, and the tag stays.
	t.Run("the media type refused", func(t *testing.T) {
		f.reg.RefuseMediaType("application/vnd.cncf.flux.config.v1+json")
		defer f.reg.RefuseMediaType("")
		r := f.result(f.run(), "web-dev")
		if r.Err == nil || !strings.Contains(r.Err.Error(), "MANIFEST_INVALID") || !strings.Contains(r.Err.Error(), "unsupported media type application/vnd.cncf.flux.config.v1+json") {
			t.Errorf("the sync: %v, want the registry's refusal of the media type", r.Err)
		}
		if _, d := f.artifact(t, "dev"); d != before {
			t.Errorf("the tag moved to %s", d)
		}
	})
	r := f.result(f.run(), "web-dev")
	files, after := f.artifact(t, "dev")
	if r.Result != Committed || after == before || !strings.Contains(string(files["apps/web/deployment-web.yaml"]), "replicas: 9") {
		t.Errorf("once the registry serves: %+v, the tag at %s, holding %v", r, after, slices.Sorted(maps.Keys(files)))
	}
	if immutable := f.immutableTags(t); len(immutable) != 2 {
		t.Errorf("the immutable tags are %v: one per hydration is wanted", immutable)
	}
}

// immutableTags lists the tags of the fixture's artifact repository
// other than the environments' and signatures.
func (f *fixture) immutableTags(t *testing.T) []string {
	t.Helper()
	repo, err := name.NewRepository(f.reg.Host+"/team/deploy", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	tags, err := remote.List(repo)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tag := range tags {
		if strings.HasPrefix(tag, "dev-") {
			out = append(out, tag)
		}
	}
	return out
}

// An environment's tag that names an artifact without its immutable tag
// (a push Sluice before this one cut short after moving the tag first):
// the next run, with nothing to change, gives it.
func TestAHalfLandedArtifactIsCompletedByTheNextRun(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", ociDevSync)
	f.run()
	tags := f.immutableTags(t)
	if len(tags) != 1 {
		t.Fatalf("immutable tags %v", tags)
	}
	ref, err := name.NewTag(f.reg.Host+"/team/deploy:"+tags[0], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+f.reg.Host+"/v2/team/deploy/manifests/"+ref.TagStr(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("deleting %s: %v %v", ref, err, resp)
	}
	if got := f.immutableTags(t); len(got) != 0 {
		t.Fatalf("the registry kept %v", got)
	}
	if r := f.result(f.run(), "web-dev"); r.Result != Unchanged || r.Err != nil {
		t.Fatalf("the run: %+v", r)
	}
	if got := f.immutableTags(t); !slices.Equal(got, tags) {
		t.Errorf("after the run, immutable tags %v, want %v", got, tags)
	}
}

// A takeover of an OCI destination: the artifact the environment's tag
// names holds the taken-over folder, locked, and the lock is visible in
// the registry (the artifact's dev.sluice.takeover annotation, and the
// takeover's deployment tag names it too); a regular run leaves the
// locked folder alone; the lock is extended in place; a release writes
// the folder back and the annotation goes.
func TestATakeoverOfAnOCIDestination(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", ociDevSync)
	f.sync("shop-dev", ociShopSync)
	f.run()
	_, regular := f.artifact(t, "dev")
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	lock := &v1alpha1.Takeover{Owner: "alice@laptop", Tag: "dev-alice", Expires: expires.Format(time.RFC3339)}
	f.app.Write(map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4}\n"}).Commit("four")
	f.app.Push("main")
	rep := f.run(func(o *Options) { o.Takeover = lock })
	if r := f.result(rep, "web-dev"); r.Result != Committed {
		t.Fatalf("the takeover: %+v", r)
	}
	ctx := context.Background()
	annotation := func(tag string) (string, string) {
		t.Helper()
		ref, _ := name.NewTag(f.reg.Host+"/team/deploy:"+tag, name.Insecure)
		_, m, digest, found, err := ociartifact.Read(ctx, ref, ociartifact.DefaultLimits())
		if err != nil || !found {
			t.Fatalf("reading %s: %v", ref, err)
		}
		return m.Annotations[ociartifact.AnnotationTakeover], digest.String()
	}
	taken, takenDigest := annotation("dev")
	// Both syncs of the run are taken over.
	if want := "alice@laptop holds apps/shop until " + lock.Expires + "; alice@laptop holds apps/web until " + lock.Expires; taken != want {
		t.Errorf("the artifact's %s = %q, want %q", ociartifact.AnnotationTakeover, taken, want)
	}
	if _, d := annotation("dev-alice"); d != takenDigest || takenDigest == regular {
		t.Errorf("the takeover's tag dev-alice is at %s, dev at %s (was %s)", d, takenDigest, regular)
	}
	files, _ := f.artifact(t, "dev")
	if !strings.Contains(string(files["apps/web/deployment-web.yaml"]), "replicas: 4") || !strings.Contains(string(files["apps/web/.sluice.yaml"]), "alice@laptop") {
		t.Errorf("the taken-over folder:\n%s\n%s", files["apps/web/deployment-web.yaml"], files["apps/web/.sluice.yaml"])
	}

	// A regular run: the locked folder stays; the other goes on.
	if r := f.result(f.run(), "web-dev"); r.Result != Locked {
		t.Errorf("a regular run over the lock: %+v", r)
	}
	if _, d := annotation("dev"); d != takenDigest {
		t.Error("a regular run moved the tag over the lock")
	}

	// Extended in place.
	set, _ := config.Load(f.syncDir)
	var web config.ManifestSync
	for _, ms := range set.ManifestSyncs {
		if ms.Name == "web-dev" {
			web = ms
		}
	}
	later := expires.Add(time.Hour)
	if _, err := ExtendLock(ctx, web, f.options(), "bob@laptop", later); !errors.Is(err, ErrNotLocked) {
		t.Errorf("another owner extends: %v", err)
	}
	if _, err := ExtendLock(ctx, web, f.options(), "alice@laptop", later); err != nil {
		t.Fatal(err)
	}
	if got, _ := annotation("dev"); got != "alice@laptop holds apps/shop until "+lock.Expires+"; alice@laptop holds apps/web until "+later.Format(time.RFC3339) {
		t.Errorf("after the extension: %q", got)
	}

	// Released: the folder written back, no lock left.
	if r := f.result(f.run(func(o *Options) { o.Release = "alice@laptop" }), "web-dev"); r.Result != Committed {
		t.Fatalf("the release: %+v", r)
	}
	if got, _ := annotation("dev"); got != "" {
		t.Errorf("after the release: %q", got)
	}
	files, _ = f.artifact(t, "dev")
	if strings.Contains(string(files["apps/web/.sluice.yaml"]), "alice@laptop") {
		t.Errorf("the released folder still records the takeover:\n%s", files["apps/web/.sluice.yaml"])
	}
}

// A controller keeps the artifacts it read and pushed (ArtifactCache):
// a run whose tag has not moved reads it with one HEAD request, no
// download; a tag another writer moved is read again, and the sync's
// folder written back into what it holds.
func TestAnUnmovedArtifactIsNotDownloadedAgain(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", ociDevSync)
	cache := NewArtifactCache()
	withCache := func(o *Options) { o.Artifacts = cache }
	f.run(withCache)
	var blobs, heads atomic.Int64
	f.reg.FailWith(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/team/deploy/blobs/") && r.Method == http.MethodGet {
			blobs.Add(1)
		}
		if strings.HasPrefix(r.URL.Path, "/v2/team/deploy/manifests/dev") && r.Method == http.MethodHead {
			heads.Add(1)
		}
		return 0
	})
	defer f.reg.FailWith(nil)
	if r := f.result(f.run(withCache), "web-dev"); r.Result != Unchanged || r.Err != nil {
		t.Fatalf("%+v", r)
	}
	if blobs.Load() != 0 || heads.Load() == 0 {
		t.Errorf("an unmoved tag: %d blob downloads, %d HEADs of the tag; want none and some", blobs.Load(), heads.Load())
	}
	// Another writer's artifact under the tag (packed as Sluice packs):
	// read, and the folder written back.
	ref, _ := name.NewTag(f.reg.Host+"/team/deploy:dev", name.Insecure)
	img, _ := ociartifact.Pack(map[string][]byte{"apps/web/x.yaml": []byte("a: 1\n")}, ociartifact.Meta{Source: "elsewhere"})
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	blobs.Store(0)
	r := f.result(f.run(withCache), "web-dev")
	files, _ := f.artifact(t, "dev")
	if blobs.Load() == 0 || r.Result != Committed || files["apps/web/x.yaml"] != nil || files["apps/web/.sluice.yaml"] == nil {
		t.Errorf("a moved tag: %d blob downloads, the sync %s, the artifact %v", blobs.Load(), r.Result, slices.Sorted(maps.Keys(files)))
	}
}

// The artifact cache holds 256 MiB of files at most, the oldest going
// first; an artifact of over half that is not kept.
func TestTheArtifactCacheIsBounded(t *testing.T) {
	c := NewArtifactCache()
	mib := make([]byte, 1<<20)
	files := func(n int) map[string][]byte {
		f := map[string][]byte{}
		for i := range n {
			f[fmt.Sprintf("apps/a/%d.yaml", i)] = mib
		}
		return f
	}
	c.put("r", "big", files(129))
	if _, ok := c.get("r", "big"); ok {
		t.Error("an artifact of 129 MiB was kept")
	}
	for i := range 10 {
		c.put("r", fmt.Sprint(i), files(40))
	}
	if c.total > artifactCacheBytes {
		t.Errorf("the cache holds %d bytes", c.total)
	}
	if _, ok := c.get("r", "0"); ok {
		t.Error("the oldest artifact is still there")
	}
	if _, ok := c.get("r", "9"); !ok {
		t.Error("the newest artifact is gone")
	}
}
