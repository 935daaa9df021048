package hydrate

import (
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
)

func TestHydrateCommitsBothAppsInOneCommitWithProvenance(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	f.sync("shop-dev", shopSync)
	before := f.dstGit("rev-parse", "main")

	rep := f.run()
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	web, shop := f.result(rep, "web-dev"), f.result(rep, "shop-dev")
	if web.Result != Committed || shop.Result != Committed || web.Commit != shop.Commit {
		t.Fatalf("results: %+v / %+v", web, shop)
	}
	if got := f.dstGit("rev-parse", "env/dev"); got != web.Commit {
		t.Fatalf("env/dev = %s, want %s", got, web.Commit)
	}
	// A new branch starts from the default branch, and one commit holds both.
	if parent := f.dstGit("rev-parse", "env/dev^"); parent != before {
		t.Errorf("env/dev's parent = %s, want main %s", parent, before)
	}
	files := f.dstGit("ls-tree", "-r", "--name-only", "env/dev")
	for _, want := range []string{"README.md", "apps/hand-written/cm.yaml", "apps/web/.sluice.yaml", "apps/web/deployment-web.yaml", "apps/web/service-web.yaml", "apps/shop/deployment-shop.yaml", "apps/shop/configmap-shop-cache.yaml", "apps/shop/.sluice.yaml"} {
		if !strings.Contains(files, want+"\n") && !strings.HasSuffix(files, want) {
			t.Errorf("env/dev lacks %s:\n%s", want, files)
		}
	}
	// Untouched files keep their very blobs.
	if a, b := f.dstGit("rev-parse", "main:README.md"), f.dstGit("rev-parse", "env/dev:README.md"); a != b {
		t.Error("README.md changed")
	}
	dep := f.dstGit("show", "env/dev:apps/web/deployment-web.yaml")
	for _, want := range []string{
		"image: " + f.reg.Host + "/team/web:dev@" + f.digests["web:dev"],
		"image: " + f.reg.Host + "/other/proxy:1.0\n", // no rule: as written
		"namespace: dev", "replicas: 2",
	} {
		if !strings.Contains(dep, want) {
			t.Errorf("deployment lacks %q:\n%s", want, dep)
		}
	}
	prov, err := parseProvenance([]byte(f.dstGit("show", "env/dev:apps/web/.sluice.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if prov.Sync != "web-dev" || prov.Source.Commit != f.app.Head() || prov.Source.Path != "deploy/overlays/dev" || prov.Source.Tree == "" || prov.Renderer.Name != "kustomize" {
		t.Errorf("provenance: %+v", prov)
	}
	if len(prov.Images) != 1 || prov.Images[0].Digest != f.digests["web:dev"] || prov.Images[0].Tag != "dev" {
		t.Errorf("provenance images: %+v", prov.Images)
	}
	var inputs []string
	for _, in := range prov.Inputs {
		inputs = append(inputs, in.Path)
	}
	if got := strings.Join(inputs, " "); !strings.Contains(got, "deploy/base/deployment.yaml") || strings.Contains(got, "charts/") || strings.Contains(got, "overlays/prod") {
		t.Errorf("inputs = %s", got)
	}
	msg := f.dstGit("log", "-1", "--format=%B", "env/dev")
	for _, want := range []string{"hydrate 2 syncs", f.appURL + "@" + f.app.Head()[:7], "Sluice-Sync: web-dev", "Sluice-Sync: shop-dev", "/team/web:dev → sha256:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("commit message lacks %q:\n%s", want, msg)
		}
	}
	shopDep := f.dstGit("show", "env/dev:apps/shop/deployment-shop.yaml")
	if !strings.Contains(shopDep, "replicas: 3") || !strings.Contains(shopDep, "shop:1.0@"+f.digests["shop:1.0"]) {
		t.Errorf("chart render:\n%s", shopDep)
	}
}

func TestHydrateSkipsUnchangedSyncsWithoutRenderingOrPushing(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	f.sync("shop-dev", shopSync)
	if err := f.run().Err(); err != nil {
		t.Fatal(err)
	}
	tip := f.dstGit("rev-parse", "env/dev")
	rep := f.run()
	for _, r := range rep.Results {
		if r.Result != Unchanged || r.Rendered {
			t.Errorf("%s: %s, rendered %v; want unchanged without render", r.Name, r.Result, r.Rendered)
		}
	}
	if got := f.dstGit("rev-parse", "env/dev"); got != tip {
		t.Errorf("a commit was made: %s", got)
	}
	// A commit elsewhere in the source repo does not re-render either.
	f.app.Write(map[string]string{"README.md": "# app, edited\n"}).Commit("docs")
	f.app.Push("main")
	for _, r := range f.run().Results {
		if r.Result != Unchanged || r.Rendered {
			t.Errorf("after an unrelated commit %s: %s, rendered %v", r.Name, r.Result, r.Rendered)
		}
	}
	// --force renders anyway; the new source commit lands in provenance.
	forced := f.run(func(o *Options) { o.Force = true })
	for _, r := range forced.Results {
		if !r.Rendered || r.Result != Committed {
			t.Errorf("--force: %s %s rendered %v", r.Name, r.Result, r.Rendered)
		}
	}
}

func TestHydrateRerendersOnlyTheOverlayACommitTouched(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	f.sync("web-prod", strings.NewReplacer("web-dev", "web-prod", "overlays/dev", "overlays/prod", "env/dev", "env/prod", "tag: dev", "tag: prod").Replace(devSync))
	f.sync("shop-dev", shopSync)
	if err := f.run().Err(); err != nil {
		t.Fatal(err)
	}
	f.app.Write(map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n"}).Commit("dev: 5 replicas")
	f.app.Push("main")
	rep := f.run()
	if r := f.result(rep, "web-dev"); r.Result != Committed || !r.Rendered {
		t.Errorf("web-dev: %s rendered %v", r.Result, r.Rendered)
	}
	for _, n := range []string{"web-prod", "shop-dev"} {
		if r := f.result(rep, n); r.Result != Unchanged || r.Rendered {
			t.Errorf("%s: %s rendered %v, want skipped without render", n, r.Result, r.Rendered)
		}
	}
	if !strings.Contains(f.dstGit("show", "env/dev:apps/web/deployment-web.yaml"), "replicas: 5") {
		t.Error("dev change not landed")
	}
	// Editing the shared base re-renders both overlays.
	f.app.Write(f.expand(map[string]string{"deploy/base/deployment.yaml": strings.Replace(deployment, "replicas: 1", "replicas: 1\n  revisionHistoryLimit: 3", 1)})).Commit("base")
	f.app.Push("main")
	rep = f.run()
	for n, want := range map[string]Outcome{"web-dev": Committed, "web-prod": Committed, "shop-dev": Unchanged} {
		if r := f.result(rep, n); r.Result != want {
			t.Errorf("after a base change %s: %s, want %s", n, r.Result, want)
		}
	}
}

func TestHydrateFollowsAMutableTagToItsNewDigest(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	first := f.run()
	if err := first.Err(); err != nil {
		t.Fatal(err)
	}
	moved := f.reg.Push(t, "team/web:dev")
	rep := f.run()
	r := f.result(rep, "web-dev")
	if r.Result != Committed {
		t.Fatalf("after the tag moved: %s %s", r.Result, r.Error)
	}
	if !strings.Contains(f.dstGit("show", "env/dev:apps/web/deployment-web.yaml"), "web:dev@"+moved) {
		t.Error("not re-pinned to the new digest")
	}
	msg := f.dstGit("log", "-1", "--format=%B", "env/dev")
	if !strings.Contains(msg, "team/web:dev "+f.digests["web:dev"][:19]+" → :dev "+moved[:19]) {
		t.Errorf("commit message does not name the image change:\n%s", msg)
	}
}

func TestHydrateFailedSyncLeavesItsFolderAndTheOthersLand(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	f.sync("shop-dev", shopSync)
	if err := f.run().Err(); err != nil {
		t.Fatal(err)
	}
	shopBefore := f.dstGit("rev-parse", "env/dev:apps/shop")
	// shop now asks for a tag that does not exist; web's overlay changes.
	f.app.Write(f.expand(map[string]string{
		"charts/shop/values.yaml":           "image: REG/team/shop:9.9\nreplicas: 1\n",
		"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4}\n",
	})).Commit("break shop")
	f.app.Push("main")
	rep := f.run()
	shop, web := f.result(rep, "shop-dev"), f.result(rep, "web-dev")
	if shop.Result != Failed || !strings.Contains(shop.Error, `/team/shop: tag "9.9" not found`) {
		t.Errorf("shop: %s %q", shop.Result, shop.Error)
	}
	if web.Result != Committed {
		t.Errorf("web: %s %s", web.Result, web.Error)
	}
	if got := f.dstGit("rev-parse", "env/dev:apps/shop"); got != shopBefore {
		t.Error("the failed sync's folder changed")
	}
	if rep.Err() == nil || !strings.Contains(rep.Err().Error(), "1 of 2 syncs failed: shop-dev") {
		t.Errorf("report error = %v", rep.Err())
	}
}

func TestHydrateRepairsAFolderEditedByHand(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	if err := f.run().Err(); err != nil {
		t.Fatal(err)
	}
	w := f.cloneDst("env/dev")
	w.Write(map[string]string{"apps/web/service-web.yaml": "hand edit\n"}).Commit("hand edit")
	w.Push("env/dev")
	if r := f.result(f.run(), "web-dev"); r.Result != Committed {
		t.Fatalf("hand-edited folder: %s", r.Result)
	}
	if strings.Contains(f.dstGit("show", "env/dev:apps/web/service-web.yaml"), "hand edit") {
		t.Error("not repaired")
	}
}

func TestHydrateDryRunDiffsAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	rep := f.run(func(o *Options) { o.DryRun = true })
	r := f.result(rep, "web-dev")
	if r.Result != Changed || !strings.Contains(r.Diff, "+++ b/apps/web/deployment-web.yaml") || !strings.Contains(r.Diff, "--- /dev/null") {
		t.Errorf("dry run: %s\n%s", r.Result, r.Diff)
	}
	if out := testenvGitOK(f, "rev-parse", "--verify", "-q", "env/dev"); out {
		t.Error("dry run created env/dev")
	}
	if err := f.run().Err(); err != nil {
		t.Fatal(err)
	}
	f.app.Write(map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 7}\n"}).Commit("7")
	f.app.Push("main")
	r = f.result(f.run(func(o *Options) { o.DryRun = true }), "web-dev")
	if !strings.Contains(r.Diff, "-  replicas: 2\n+  replicas: 7") {
		t.Errorf("diff:\n%s", r.Diff)
	}
	if rep := f.run(func(o *Options) { o.DryRun = true; o.Force = false }); rep.Changed() != true {
		t.Error("Changed() false")
	}
}

func TestHydrateReviewBranchMode(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", strings.Replace(devSync, "path: apps/web}", "path: apps/web, mode: branch}", 1))
	r := f.result(f.run(), "web-dev")
	if r.Result != Committed {
		t.Fatalf("%s %s", r.Result, r.Error)
	}
	if got := f.dstGit("rev-parse", "sluice/env/dev/web-dev"); got != r.Commit {
		t.Errorf("review branch = %s", got)
	}
	if testenvGitOK(f, "rev-parse", "--verify", "-q", "env/dev") {
		t.Error("branch mode pushed to env/dev itself")
	}
	if r := f.result(f.run(), "web-dev"); r.Result != Unchanged {
		t.Errorf("second run: %s", r.Result)
	}
}

func TestHydrateOrphanBranchInEmptyRepository(t *testing.T) {
	f := newFixture(t)
	f.dstURL = f.git.CreateRepo(t, "empty")
	f.sync("web-dev", devSync)
	r := f.result(f.run(), "web-dev")
	if r.Result != Committed {
		t.Fatalf("%s %s", r.Result, r.Error)
	}
	bare := f.git.Root + "/empty.git"
	if parents := testGit(t, bare, "rev-list", "--parents", "-n1", "env/dev"); len(strings.Fields(parents)) != 1 {
		t.Errorf("not an orphan commit: %s", parents)
	}
	if files := testGit(t, bare, "ls-tree", "-r", "--name-only", "env/dev"); strings.Contains(files, "README") {
		t.Errorf("files: %s", files)
	}
}

func TestHydrateOutDirWritesFoldersWithoutGit(t *testing.T) {
	f := newFixture(t)
	f.sync("web-dev", devSync)
	out := t.TempDir()
	r := f.result(f.run(func(o *Options) { o.OutDir = out }), "web-dev")
	if r.Result != Changed {
		t.Fatalf("%s %s", r.Result, r.Error)
	}
	data := readFile(t, out+"/env/dev/apps/web/deployment-web.yaml")
	if !strings.Contains(data, "@"+f.digests["web:dev"]) {
		t.Errorf("out file:\n%s", data)
	}
	if r := f.result(f.run(func(o *Options) { o.OutDir = out }), "web-dev"); r.Result != Unchanged || r.Rendered {
		t.Errorf("second --out run: %s rendered %v", r.Result, r.Rendered)
	}
	if testenvGitOK(f, "rev-parse", "--verify", "-q", "env/dev") {
		t.Error("--out pushed to git")
	}
	var _ = v1alpha1.ProvenanceFile
}
