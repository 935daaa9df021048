package render

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// tgz is a gzipped tar of files (name → size bytes of zeros, or content).
func tgz(t *testing.T, files map[string]any) string {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	for name, v := range files {
		var data []byte
		switch v := v.(type) {
		case int:
			data = make([]byte, v)
		case string:
			data = []byte(v)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	zw.Close()
	return b.String()
}

// TestArchivesAreChargedForWhatTheyExpandTo, as a chart's author: twelve
// subcharts vendored as small archives (64 KiB each) that expand to
// 64 MiB apiece fail the render on the read limit, counted as they
// expand, before helm loads any; so does one hidden inside another.
func TestArchivesAreChargedForWhatTheyExpandTo(t *testing.T) {
	sub := func(name string) string {
		return tgz(t, map[string]any{
			name + "/Chart.yaml":        "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
			name + "/templates/pad.txt": 64 << 20,
		})
	}
	files := mapFS{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}
	compressed := 0
	for i := range 12 {
		a := sub(fmt.Sprintf("s%d", i))
		compressed += len(a)
		files[fmt.Sprintf("c/charts/s%d-0.1.0.tgz", i)] = a
	}
	t.Logf("12 archives, %d KiB compressed", compressed>>10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Render(context.Background(), files.fs(), "c", Options{ReleaseName: "r"})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "what its archive expands to") || !strings.Contains(err.Error(), "--max-read-size") {
		t.Fatalf("err = %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 128<<20 {
		t.Errorf("the render allocated %d MiB for %d KiB of archives", alloc>>20, compressed>>10)
	}

	// One inside another: the outer is small, what it holds is not.
	inner := sub("inner")
	outer := tgz(t, map[string]any{"outer/Chart.yaml": "apiVersion: v2\nname: outer\nversion: 0.1.0\n", "outer/charts/inner-0.1.0.tgz": inner})
	nested := mapFS{"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/charts/outer-0.1.0.tgz": outer}
	_, err = Render(context.Background(), nested.fs(), "c", Options{ReleaseName: "r", Limits: Limits{ReadBytes: 32 << 20}})
	if err == nil || !strings.Contains(err.Error(), "outer/charts/inner-0.1.0.tgz") {
		t.Fatalf("nested: err = %v", err)
	}
}

// committed opens the tree of a working clone's HEAD, as a sync's source
// is read.
func committed(t *testing.T, w *testenv.Work) source.FS {
	t.Helper()
	o, err := source.NewCache(t.TempDir()).OpenSource(context.Background(), w.Dir, "HEAD", "")
	if err != nil {
		t.Fatal(err)
	}
	return o.FS
}

// TestSymlinkCyclesFailFastNamingTheLink, as a repository's author:
// three links to "." make every walk that follows links exponential; a
// plain-YAML folder and a chart holding them fail at once, naming the
// link, from a commit's tree and from a working tree alike.
func TestSymlinkCyclesFailFastNamingTheLink(t *testing.T) {
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{
		"p/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\n",
		"c/Chart.yaml":            "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"c/templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
		"k/kustomization.yaml":    "resources: [cm.yaml]\n",
		"k/cm.yaml":               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\n",
		"k/loop/placeholder.yaml": "",
	})
	for _, d := range []string{"p/loop", "c/templates/loop", "k/loop"} {
		w.Link(map[string]string{d + "/a": ".", d + "/b": ".", d + "/c": "."})
	}
	w.Commit("loops")
	trees := map[string]source.FS{"commit": committed(t, w)}
	dir, err := source.Dir(w.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	trees["working tree"] = dir
	for name, fsys := range trees {
		for folder, want := range map[string]string{"p": "p/loop/a", "c": "c/templates/loop/a"} {
			_, err := Render(context.Background(), fsys, folder, Options{ReleaseName: "r", Limits: Limits{Timeout: time.Minute}})
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "a cycle") {
				t.Errorf("%s, %s: %v", name, folder, err)
			}
		}
		// kustomize reads only what it names: the loop beside it is harmless.
		if _, err := Render(context.Background(), fsys, "k", Options{}); err != nil {
			t.Errorf("%s, k: %v", name, err)
		}
	}
}

// TestDeepNestingIsRefusedBeforeKustomizeSeesIt: a resource nested 9,900
// levels deep (kustomize spends half a minute on it) fails at once, in
// block and in flow style, and so does one in a plain folder or a chart's
// output.
func TestDeepNestingIsRefusedBeforeKustomizeSeesIt(t *testing.T) {
	// Block sequences nest without indentation: "- - - x".
	block := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\nextra:\n" + strings.Repeat("- ", 9900) + "x\n"
	flow := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\nextra: " + strings.Repeat("[", 9900) + strings.Repeat("]", 9900) + "\n"
	files := mapFS{
		"kb/kustomization.yaml": "resources: [deep.yaml]\n", "kb/deep.yaml": block,
		"kf/kustomization.yaml": "resources: [deep.yaml]\n", "kf/deep.yaml": flow,
		"p/deep.yaml":  block,
		"c/Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n", "c/templates/deep.yaml": flow,
	}
	for _, dir := range []string{"kb", "kf", "p", "c"} {
		start := time.Now()
		_, err := Render(context.Background(), files.fs(), dir, Options{ReleaseName: "r"})
		if err == nil || !strings.Contains(err.Error(), "over the limit of 100 levels; raise it with --max-depth") {
			t.Errorf("%s: %v", dir, err)
		}
		// Far under the half minute kustomize takes: a generous bound.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: refused after %s", dir, d)
		}
	}
}

// TestObjectsAreCountedWhileParsing: a 30 MiB file of one-line objects
// stops at the object limit as it is parsed, in little memory, in a
// plain folder and in a kustomization.
func TestObjectsAreCountedWhileParsing(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 30<<20; i++ {
		fmt.Fprintf(&b, "---\n{apiVersion: v1, kind: ConfigMap, metadata: {name: c%d}}\n", i)
	}
	files := mapFS{"p/many.yaml": b.String(), "k/kustomization.yaml": "resources: [many.yaml]\n", "k/many.yaml": b.String()}
	for _, dir := range []string{"p", "k"} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Render(context.Background(), files.fs(), dir, Options{})
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "raise it with --max-objects") {
			t.Errorf("%s: %v", dir, err)
		}
		// What is allocated is the file's reads (each a copy of its 30 MiB
		// here), not its half a million objects: 1.1 GB before.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
			t.Errorf("%s: allocated %d MiB before refusing", dir, alloc>>20)
		}
	}
}

// TestAPlainFolderStopsAtTheOutputLimitBeforeParsingMore: a folder of
// plain YAML is its output; the file that takes it past the limit is
// named, and the files after it are not parsed (one of them is not YAML).
func TestAPlainFolderStopsAtTheOutputLimitBeforeParsingMore(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: NAME}\ndata: {a: '" + strings.Repeat("x", 600<<10) + "'}\n"
	files := mapFS{
		"p/a.yaml": strings.Replace(cm, "NAME", "a", 1),
		"p/b.yaml": strings.Replace(cm, "NAME", "b", 1),
		"p/c.yaml": "{{ not yaml",
	}
	_, err := Render(context.Background(), files.fs(), "p", Options{Limits: Limits{OutputBytes: 1 << 20}})
	var le *LimitError
	if !errors.As(err, &le) || le.Flag != FlagOutputBytes || !strings.Contains(err.Error(), "p/b.yaml") {
		t.Fatalf("err = %v", err)
	}
}

func TestYAMLDepthEstimate(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want int
	}{
		{"a: b\n", 1},
		{"a:\n  b:\n    c: d\n", 3},
		{"a:\n- b\n- c\n", 2},
		{"- - - x\n", 4}, // errs high: the scalar is no level
		{"a: [1, [2, {b: c}]]\n", 4},
		{"a: \"[[[[\"\nb: 'x[{'\n", 1},
		{"a: don't [stop]\n", 2},
		{"a: |\n  [[[[[[\n    {{{{\nb: c\n", 1},
		{"# [[[[\na: b # {{{\n", 1},
		{"a:\n  b: c\n---\nd: e\n", 2},
		{`{"a": {"b": {"c": ["d"]}}}`, 5}, // errs high by the line's own level
	} {
		if got, _ := yamlDepth([]byte(tt.doc)); got != tt.want {
			t.Errorf("%q: depth %d, want %d", tt.doc, got, tt.want)
		}
	}
}

// TestYAMLDepthNeverErrsLowByMoreThanHalf: the style a scanner counts
// worst (each sequence at its key's indentation) still counts half.
func TestYAMLDepthNeverErrsLowByMoreThanHalf(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "%s- a:\n", strings.Repeat("  ", i))
	}
	if got, _ := yamlDepth([]byte("a:\n" + b.String())); got < 300 {
		t.Errorf("600 levels counted as %d", got)
	}
}

// TestAFolderOfAQuarterMillionEntriesFailsOnTheEntryLimit, as a
// repository's author: one folder of 250,000 files (listed at 0.2 ms an
// entry, it took over 40 s) fails on the entry limit, in seconds, from a
// commit's tree; the same folder under a raised limit is walked.
func TestAFolderOfAQuarterMillionEntriesFailsOnTheEntryLimit(t *testing.T) {
	repo := t.TempDir()
	testenv.Git(t, repo, "init", "-q", "--bare")
	blob := strings.TrimSpace(gitIn(t, repo, "apiVersion: v1\n", "hash-object", "-w", "--stdin"))
	var listing strings.Builder
	for i := range 250_000 {
		fmt.Fprintf(&listing, "100644 blob %s\tf%06d.txt\n", blob, i)
	}
	big := strings.TrimSpace(gitIn(t, repo, listing.String(), "mktree"))
	root := strings.TrimSpace(gitIn(t, repo, "040000 tree "+big+"\tp\n", "mktree"))
	commit := strings.TrimSpace(gitIn(t, repo, "", "commit-tree", root, "-m", "many"))
	testenv.Git(t, repo, "update-ref", "refs/heads/main", commit)
	o, err := source.NewCache(t.TempDir()).OpenSource(context.Background(), repo, "main", "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Render(context.Background(), o.FS, "p", Options{})
	if err == nil || !strings.Contains(err.Error(), "raise it with --max-entries") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("refused after %s", d)
	}
	// No file of it is YAML: raised past it, the folder renders nothing.
	res, err := Render(context.Background(), o.FS, "p", Options{Limits: Limits{Entries: 300_000}})
	if err != nil || len(res.Objects) != 0 {
		t.Fatalf("under a raised limit: %v, %d objects", err, len(res.Objects))
	}
}

// gitIn runs git in dir with stdin.
func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestAKustomizationsOwnSchemaStaysItsOwn, as a team whose kustomization
// sets its own OpenAPI schema (one that knows no Deployment): another
// team's Deployment rendered after it in the same process keeps its
// sidecar; kyaml's schema is the process's, and was left set.
func TestAKustomizationsOwnSchemaStaysItsOwn(t *testing.T) {
	files := mapFS{
		"base/kustomization.yaml":   "resources: [deployment.yaml]\n",
		"base/deployment.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: app, image: app:1}\n      - {name: sidecar, image: proxy:1}\n",
		"other/kustomization.yaml":  "resources: [../base]\npatches:\n- path: image.yaml\n",
		"other/image.yaml":          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n      - {name: app, image: app:2}\n",
		"custom/kustomization.yaml": "openapi: {path: schema.json}\nresources: [../base]\n",
		"custom/schema.json":        `{"definitions": {}}`,
	}
	if _, err := Render(context.Background(), files.fs(), "custom", Options{}); err != nil {
		t.Fatal(err)
	}
	res, err := Render(context.Background(), files.fs(), "other", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := res.YAML(); !strings.Contains(string(y), "name: sidecar") {
		t.Fatalf("the other team's Deployment lost its sidecar:\n%s", y)
	}
}
