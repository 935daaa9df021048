package source

import (
	"context"
	"reflect"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice.dev/sluice/internal/testenv"
)

func TestBranchHistoryNamesTheFoldersEachCommitChanged(t *testing.T) {
	w := testenv.NewWork(t, "")
	c1 := w.Write(map[string]string{"apps/a/x.yaml": "1", "apps/b/x.yaml": "1"}).Commit("both")
	w.Write(map[string]string{"README.md": "unrelated"}).Commit("readme")
	c3 := w.Write(map[string]string{"apps/a/x.yaml": "2"}).Commit("a")
	c4 := w.Write(map[string]string{"apps/b/x.yaml": ""}).Commit("b removed")
	repo, err := NewCache(t.TempDir()).Open(context.Background(), mustLoc(t, w.Dir), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := repo.BranchHistory(plumbing.NewHash(c4), []string{"apps/a", "apps/b/"}, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		hash    string
		folders []string
		removed bool
	}
	var short []entry
	for _, e := range got {
		short = append(short, entry{e.Hash, e.Folders, e.Trees[len(e.Trees)-1] == ""})
	}
	want := []entry{{c4, []string{"apps/b/"}, true}, {c3, []string{"apps/a"}, false}, {c1, []string{"apps/a", "apps/b/"}, false}}
	if !reflect.DeepEqual(short, want) {
		t.Errorf("BranchHistory:\n%v\nwant\n%v", short, want)
	}
	one, err := repo.History(plumbing.NewHash(c4), "apps/a", 1, 100)
	if err != nil || len(one) != 1 || one[0].Hash != c3 || one[0].Tree == "" || one[0].Subject != "a" {
		t.Errorf("History of apps/a, newest 1: %+v %v", one, err)
	}
}
