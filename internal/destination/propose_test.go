package destination

import (
	"context"
	"reflect"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// A proposal is always the base's tip plus the folders proposed: kept
// when unchanged, carrying the folders other syncs proposed, rebased when
// the base moves, empty when the base holds it all. The base is never
// written.
func TestProposeKeepsOneCommitOnTheBase(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "deploy")
	base := testenv.NewWork(t, url)
	base.Write(map[string]string{"README.md": "hi\n", "apps/x/" + v1alpha1.ProvenanceFile: "sync: x\n", "apps/x/a.yaml": "x\n"}).Commit("init")
	base.Push("main")
	loc, _ := source.ParseLocation(url, "")
	repo, err := source.NewCache(t.TempDir()).Open(ctx, loc, source.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	folder := func(sync, content string) Folder {
		return Folder{v1alpha1.ProvenanceFile: []byte("sync: " + sync + "\n"), "a.yaml": []byte(content)}
	}
	bare := srv.Root + "/deploy.git"
	files := func(ref string) string { return testenv.Git(t, bare, "ls-tree", "-r", "--name-only", ref) }
	mainTip := func() string { return testenv.Git(t, bare, "rev-parse", "main") }
	propose := func(changes ...Change) Proposal {
		t.Helper()
		p, err := Propose(ctx, repo, "main", "sluice/pr/main", changes, WriteOptions{Message: "proposal"})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	p := propose(Change{Path: "apps/web", Files: folder("web", "1\n")})
	if !p.Changed || p.Empty || p.Base.String() != mainTip() || !reflect.DeepEqual(p.Folders, []FolderStat{{Path: "apps/web", Added: 2}}) {
		t.Fatalf("first proposal: %+v", p)
	}
	if parent := testenv.Git(t, bare, "rev-parse", "sluice/pr/main^"); parent != mainTip() {
		t.Errorf("the proposal's parent is %s, want main's tip", parent)
	}
	if again := propose(Change{Path: "apps/web", Files: folder("web", "1\n")}); again.Changed || again.Commit != p.Commit {
		t.Errorf("the same proposal again: %+v", again)
	}

	// Another sync's change joins it; web's is carried.
	p = propose(Change{Path: "apps/api", Files: folder("api", "1\n")})
	if want := "README.md\napps/api/.sluice.yaml\napps/api/a.yaml\napps/web/.sluice.yaml\napps/web/a.yaml\napps/x/.sluice.yaml\napps/x/a.yaml"; files("sluice/pr/main") != want {
		t.Errorf("the proposal holds:\n%s", files("sluice/pr/main"))
	}
	if len(p.Folders) != 2 {
		t.Errorf("folders: %+v", p.Folders)
	}

	// The base moves: the proposal is rebuilt on it, nothing lost.
	base.Write(map[string]string{"README.md": "hello\n"}).Commit("readme")
	base.Push("main")
	if err := repo.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p = propose()
	if !p.Changed || testenv.Git(t, bare, "rev-parse", "sluice/pr/main^") != mainTip() || testenv.Git(t, bare, "show", "sluice/pr/main:apps/web/a.yaml") != "1" {
		t.Errorf("after the base moved: %+v, parent %s", p, testenv.Git(t, bare, "rev-parse", "sluice/pr/main^"))
	}

	// Both go back to what the base holds (no folder): nothing to propose.
	before := mainTip()
	if p = propose(Change{Path: "apps/web"}, Change{Path: "apps/api"}); !p.Empty {
		t.Errorf("reverted: %+v", p)
	}
	if mainTip() != before {
		t.Error("the base was written")
	}
}
