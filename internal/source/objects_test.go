package source

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	gitcache "github.com/go-git/go-git/v5/plumbing/cache"

	"sluice.dev/sluice/internal/testenv"
)

// blob is an object of content, as go-git decodes it.
func blob(content string) plumbing.EncodedObject {
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	o.Write([]byte(content))
	return o
}

func TestTheObjectCacheDropsWhatWasNotReadAndKeepsItsBound(t *testing.T) {
	const idle = 2 * time.Minute
	a, b, c := blob("aaaa"), blob("bbbb"), blob("cccc")
	big := blob("0123456789ab")
	type step struct {
		at  time.Duration // since the start
		put plumbing.EncodedObject
		get plumbing.EncodedObject
	}
	for _, tc := range []struct {
		name  string
		max   int64
		steps []step
		want  []plumbing.EncodedObject
	}{
		{"an object read within the idle time stays", 100,
			[]step{{at: 0, put: a}, {at: idle, put: b}},
			[]plumbing.EncodedObject{a, b}},
		{"an object nobody read for longer leaves at the next put", 100,
			[]step{{at: 0, put: a}, {at: idle + time.Second, put: b}},
			[]plumbing.EncodedObject{b}},
		{"an object nobody read for longer leaves at the next get", 100,
			[]step{{at: 0, put: a}, {at: time.Second, put: b}, {at: idle + time.Second/2, get: b}},
			[]plumbing.EncodedObject{b}},
		{"a read keeps an object", 100,
			[]step{{at: 0, put: a}, {at: 90 * time.Second, get: a}, {at: 150 * time.Second, put: b}},
			[]plumbing.EncodedObject{a, b}},
		{"over the bound the least recently used leaves", 10,
			[]step{{at: 0, put: a}, {at: 0, put: b}, {at: 0, get: a}, {at: 0, put: c}},
			[]plumbing.EncodedObject{a, c}},
		{"an object larger than the bound is not cached", 10,
			[]step{{at: 0, put: a}, {at: 0, put: big}},
			[]plumbing.EncodedObject{a}},
		{"an object put again counts once", 10,
			[]step{{at: 0, put: a}, {at: 0, put: a}, {at: 0, put: b}},
			[]plumbing.EncodedObject{a, b}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			var now time.Time
			oc := newObjectCache(gitcache.FileSize(tc.max), idle)
			oc.now = func() time.Time { return now }
			for _, s := range tc.steps {
				now = start.Add(s.at)
				if s.put != nil {
					oc.Put(s.put)
				}
				if s.get != nil {
					if _, ok := oc.Get(s.get.Hash()); !ok {
						t.Fatalf("at %s: %s not cached", s.at, s.get.Hash())
					}
				}
			}
			var got, want []string
			var size int64
			for e := oc.lru.Front(); e != nil; e = e.Next() {
				o := e.Value.(*cachedObject).obj
				got = append(got, o.Hash().String())
				size += o.Size()
			}
			for _, o := range tc.want {
				want = append(want, o.Hash().String())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) || oc.lru.Len() != len(want) {
				t.Errorf("cached %v (%d by hash), want %v", got, len(oc.byHash), want)
			}
			if int64(oc.size) != size || size > tc.max {
				t.Errorf("size %d, its objects %d bytes, bound %d", oc.size, size, tc.max)
			}
		})
	}
}

// A controller reads each new commit once and never again: the objects it
// read leave the cache once unread for objectIdle, whatever room is left,
// and those it goes on reading stay.
func TestAClonesObjectsLeaveTheCacheOnceUnread(t *testing.T) {
	ctx := context.Background()
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	old := map[string]string{}
	for i := range 20 {
		old[fmt.Sprintf("old/%02d.yaml", i)] = fmt.Sprintf("n: %d\n", i)
	}
	old["live/app.yaml"] = "live: 1\n"
	w.Write(old).Commit("one")
	w.Push("main")
	first := w.Head()
	cache := NewCache(t.TempDir())
	start := time.Now()
	now := start
	cache.objects.now = func() time.Time { return now }
	r, err := cache.Open(ctx, mustLoc(t, url), OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range old {
		if got := readAt(t, r, first, name); got != content {
			t.Fatalf("%s reads %q", name, got)
		}
	}
	cached := func(content string) bool {
		_, ok := cache.objects.byHash[plumbing.ComputeHash(plumbing.BlobObject, []byte(content))]
		return ok
	}
	if !cached("n: 0\n") {
		t.Fatal("the blobs read are not in the cache: the test shows nothing")
	}
	full := cache.objects.lru.Len()

	// Reading live/ every minute, for three times objectIdle.
	for now.Sub(start) <= 3*objectIdle {
		now = now.Add(time.Minute)
		if got := readAt(t, r, first, "live/app.yaml"); got != "live: 1\n" {
			t.Fatalf("live/app.yaml reads %q", got)
		}
	}
	for i := range 20 {
		if content := fmt.Sprintf("n: %d\n", i); cached(content) {
			t.Errorf("old/%02d.yaml (read once, %s ago) is still cached", i, now.Sub(start))
		}
	}
	if !cached("live: 1\n") {
		t.Error("live/app.yaml, read every minute, left the cache")
	}
	if n := cache.objects.lru.Len(); n >= full {
		t.Errorf("%d objects cached after the others went unread, %d before", n, full)
	}
}

// What a sync's check of its folder costs: warm; its objects gone from the
// cache (read last more than objectIdle ago, the clone in use by others);
// the clone unused for idleClose, its files closed and its indexes and
// decoded trees dropped (as before the object cache let go of anything);
// and that with its objects gone too.
//
//	go test ./internal/source -run '^$' -bench ReadingAFolder -benchtime 2000x
func BenchmarkReadingAFolder(b *testing.B) {
	ctx := context.Background()
	srv := testenv.NewGitServer(b)
	url := srv.CreateRepo(b, "app")
	w := testenv.NewWork(b, url)
	cache := NewCache(b.TempDir())
	every := ContextWithMaxAge(ctx, time.Nanosecond)
	var r *Repo
	// 20 apps of two files, 30 pushes each changing one app, each fetched:
	// the clone's objects spread over packs as a controller's are.
	for i := range 30 {
		files := map[string]string{}
		for a := range 20 {
			if i == 0 || a == i%20 {
				files[fmt.Sprintf("app%02d/deployment.yaml", a)] = fmt.Sprintf("kind: Deployment\nmetadata: {name: app%02d}\nspec: {replicas: %d}\n", a, i)
				files[fmt.Sprintf("app%02d/configmap.yaml", a)] = fmt.Sprintf("kind: ConfigMap\ndata: {v: %q}\n", strings.Repeat("x", 512*(i+1)))
			}
		}
		w.Write(files).Commit(fmt.Sprint(i))
		w.Push("main")
		var err error
		if r, err = cache.Open(every, mustLoc(b, url), OpenOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	head := plumbing.NewHash(w.Head())
	check := func() {
		root, err := r.CommitTree(head)
		if err != nil {
			b.Fatal(err)
		}
		entries, err := r.ReadTree(root)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			if e.Name != "app07" {
				continue
			}
			files, err := r.ReadTree(e.Hash)
			if err != nil {
				b.Fatal(err)
			}
			for _, f := range files {
				if _, err := r.ReadBlob(f.Hash); err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		b.Fatal("no app07")
	}
	for _, bc := range []struct {
		name  string
		reset func()
	}{
		{"warm", func() {}},
		{"objects left", func() { cache.objects.Clear() }},
		{"files closed", func() { r.closeFiles() }},
		{"files closed, objects left", func() { r.closeFiles(); cache.objects.Clear() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			check()
			for b.Loop() {
				b.StopTimer()
				bc.reset()
				b.StartTimer()
				check()
			}
		})
	}
}
