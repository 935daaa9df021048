package review

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// fixture is a source repository of kustomize overlays over one base, a
// chart and a Secret, on a real git server; a deploy repository its syncs
// have hydrated; images in a real registry.
type fixture struct {
	t       *testing.T
	srv     *testenv.GitServer
	reg     *testenv.Registry
	src     *testenv.Work
	srcURL  string
	dstURL  string
	cache   string
	syncs   []config.ManifestSync
	renders *renderLog
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: REG/team/web:1.0}
`

const syncs = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web-dev}
spec:
  source: {repo: SRC, ref: main, path: deploy/overlays/dev}
  images: [{name: REG/team/*}]
  destination: {repo: DST, branch: env/dev, path: apps/web}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web-prod}
spec:
  source: {repo: SRC, ref: main, path: deploy/overlays/prod}
  images: [{name: REG/team/*}]
  destination: {repo: DST, branch: env/prod, path: apps/web}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: db-dev}
spec:
  source: {repo: SRC, path: deploy/db}
  destination: {repo: DST, branch: env/dev, path: apps/db, secrets: plaintext}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web-release}
spec:
  source: {repo: SRC, ref: release, path: deploy/overlays/prod}
  images: [{name: REG/team/*}]
  destination: {repo: DST, branch: env/release, path: apps/web}
`

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, srv: testenv.NewGitServer(t), reg: testenv.NewRegistry(t), cache: t.TempDir(), renders: &renderLog{}}
	f.reg.Push(t, "team/web:1.0")
	f.reg.Push(t, "team/web:1.1")
	f.srcURL, f.dstURL = f.srv.CreateRepo(t, "src"), f.srv.CreateRepo(t, "deploy")
	f.src = testenv.NewWork(t, f.srcURL)
	f.write(map[string]string{
		"deploy/base/kustomization.yaml":          "resources: [deployment.yaml, service.yaml]\n",
		"deploy/base/deployment.yaml":             deployment,
		"deploy/base/service.yaml":                "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n",
		"deploy/overlays/dev/kustomization.yaml":  "namespace: dev\nresources: [../../base]\npatches:\n- path: replicas.yaml\n",
		"deploy/overlays/dev/replicas.yaml":       "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
		"deploy/overlays/prod/kustomization.yaml": "namespace: prod\nresources: [../../base]\n",
		"deploy/db/kustomization.yaml":            "namespace: db\nresources: [secret.yaml]\n",
		"deploy/db/secret.yaml":                   "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: hunter2-old, user: app}\n",
		"README.md":                               "# src\n",
	})
	f.src.Commit("sources")
	f.src.Push("main", "main:release")
	d := testenv.NewWork(t, f.dstURL)
	d.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	d.Push("main")

	dir := t.TempDir()
	r := strings.NewReplacer("REG", f.reg.Host, "SRC", f.srcURL, "DST", f.dstURL)
	if err := os.WriteFile(filepath.Join(dir, "syncs.yaml"), []byte(r.Replace(syncs)), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.syncs = set.ManifestSyncs
	rep, err := hydrate.Run(context.Background(), f.syncs, f.hydrateOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	f.renders.reset()
	return f
}

func (f *fixture) write(files map[string]string) {
	out := map[string]string{}
	for k, v := range files {
		out[k] = strings.ReplaceAll(v, "REG", f.reg.Host)
	}
	f.src.Write(out)
}

func (f *fixture) hydrateOptions() hydrate.Options {
	reg := registry.New()
	return hydrate.Options{Cache: source.NewCache(f.cache), Registry: reg, Charts: &render.Charts{Registry: reg},
		Log: slog.New(f.renders)}
}

// branch makes a branch off main with files changed, pushed as ref.
func (f *fixture) branch(name, ref string, files map[string]string) string {
	f.t.Helper()
	testenv.Git(f.t, f.src.Dir, "checkout", "-q", "-b", name, "main")
	f.write(files)
	head := f.src.Commit(name)
	f.src.Push(name + ":" + ref)
	testenv.Git(f.t, f.src.Dir, "checkout", "-q", "main")
	return head
}

func (f *fixture) preview(ch Change) *Report {
	f.t.Helper()
	f.renders.reset()
	if ch.Repo == "" {
		ch.Repo = f.srcURL
	}
	if ch.Base == "" {
		ch.Base = "main"
	}
	rep, err := Run(context.Background(), f.syncs, ch, Options{Hydrate: f.hydrateOptions()})
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// renderLog counts the engine's renders, by the record it logs for each.
type renderLog struct {
	mu    sync.Mutex
	syncs []string
}

func (l *renderLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *renderLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "rendering" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "sync" {
			l.mu.Lock()
			l.syncs = append(l.syncs, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}
func (l *renderLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *renderLog) WithGroup(string) slog.Handler      { return l }
func (l *renderLog) reset()                             { l.mu.Lock(); l.syncs = nil; l.mu.Unlock() }
func (l *renderLog) rendered() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.syncs)
	slices.Sort(out)
	return out
}

func names(r *Report) []string {
	var out []string
	for _, s := range r.Syncs {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func TestAPullRequestReachesTheSyncsThatReadWhatItChanges(t *testing.T) {
	f := newFixture(t)

	// An overlay's file: its one sync, rendered alone.
	f.branch("more-replicas", "refs/heads/more-replicas", map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n"})
	rep := f.preview(Change{Head: "more-replicas"})
	if got := names(rep); !slices.Equal(got, []string{"web-dev"}) {
		t.Fatalf("reached %v, want [web-dev]", got)
	}
	if got := f.renders.rendered(); !slices.Equal(got, []string{"web-dev"}) {
		t.Errorf("rendered %v, want [web-dev] alone", got)
	}
	if rep.Following != 3 {
		t.Errorf("%d syncs follow main, want 3 (web-release follows release)", rep.Following)
	}
	s := rep.Syncs[0]
	if s.Changes == nil || !slices.Equal(s.Changes.Changed, []string{"Deployment.apps dev/web"}) || len(s.Changes.Added)+len(s.Changes.Removed)+len(s.Changes.Repinned) != 0 {
		t.Errorf("changes %+v, want Deployment.apps dev/web changed alone", s.Changes)
	}
	if strings.Contains(s.Diff, ".sluice.yaml") {
		t.Errorf("the diff shows the provenance record, no manifest:\n%s", s.Diff)
	}
	if !strings.Contains(s.Diff, "-  replicas: 2") || !strings.Contains(s.Diff, "+  replicas: 3") || s.Branch != "env/dev" || s.Path != "apps/web" {
		t.Errorf("sync %+v", s)
	}
	if rep.Summary() != "1 folder changes" || rep.Failed() || !rep.Changed() {
		t.Errorf("summary %q, failed %v, changed %v", rep.Summary(), rep.Failed(), rep.Changed())
	}

	// The base both overlays read: both syncs that follow main; not the
	// one that follows release, nor the one of another folder.
	f.branch("new-image", "refs/heads/new-image", map[string]string{"deploy/base/deployment.yaml": strings.Replace(deployment, "web:1.0", "web:1.1", 1)})
	rep = f.preview(Change{Head: "new-image"})
	if got := names(rep); !slices.Equal(got, []string{"web-dev", "web-prod"}) {
		t.Fatalf("reached %v, want [web-dev web-prod]", got)
	}
	if got := f.renders.rendered(); !slices.Equal(got, []string{"web-dev", "web-prod"}) {
		t.Errorf("rendered %v", got)
	}
	for _, s := range rep.Syncs {
		if s.Changes == nil || len(s.Changes.Repinned) != 1 || !strings.Contains(s.Changes.Repinned[0], "team/web:1.1@sha256:") {
			t.Errorf("%s: images pinned anew %+v, want team/web:1.1", s.Name, s.Changes)
		}
	}
	if rep.Summary() != "2 folders change" {
		t.Errorf("summary %q", rep.Summary())
	}
	md := rep.Markdown(Format{Limit: GitHubLimit})
	for _, want := range []string{Marker, "### Sluice: 2 folders change", "**env/dev** of", "**env/prod** of", "| ✏️ | web-dev | `apps/web` | 0 | 1 | 0 | 1 |", "<details><summary>web-prod: <code>apps/web</code> on env/prod</summary>", "```diff\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("the comment lacks %q:\n%s", want, md)
		}
	}

	// Nothing deployable: one line, nothing rendered.
	f.branch("docs", "refs/heads/docs", map[string]string{"README.md": "# the sources\n"})
	rep = f.preview(Change{Head: "docs"})
	if len(rep.Syncs) != 0 || len(f.renders.rendered()) != 0 || rep.Changed() || rep.Failed() {
		t.Errorf("a README edit reached %v, rendered %v", names(rep), f.renders.rendered())
	}
	if md := rep.Markdown(Format{}); strings.Count(strings.TrimSpace(strings.TrimPrefix(md, Marker)), "\n") != 0 || !strings.Contains(md, "nothing deployable changes") {
		t.Errorf("the comment of nothing:\n%s", md)
	}
}

// A Secret a pull request changes shows which keys change, never a value
// (neither the old nor the new).
func TestAPreviewShowsNoSecretValue(t *testing.T) {
	f := newFixture(t)
	f.branch("rotate", "refs/heads/rotate", map[string]string{"deploy/db/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: hunter2-new, user: app}\n"})
	rep := f.preview(Change{Head: "rotate"})
	if got := names(rep); !slices.Equal(got, []string{"db-dev"}) {
		t.Fatalf("reached %v", got)
	}
	md := rep.Markdown(Format{})
	if !strings.Contains(md, "password") || !strings.Contains(md, "Secret db/db") && !strings.Contains(rep.Syncs[0].Diff, "password") {
		t.Errorf("the comment does not say which key changed:\n%s", md)
	}
	for _, leak := range []string{"hunter2", "aHVudGVyMi", "YXBw"} {
		if strings.Contains(md, leak) {
			t.Errorf("the comment holds %q:\n%s", leak, md)
		}
	}
}

// A pull request whose head cannot merge onto its base says so, renders
// nothing, and fails.
func TestAPullRequestThatCannotMergeSaysSo(t *testing.T) {
	f := newFixture(t)
	f.branch("three", "refs/heads/three", map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n"})
	f.write(map[string]string{"deploy/overlays/dev/replicas.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 4}\n"})
	f.src.Commit("four on main")
	f.src.Push("main")
	rep := f.preview(Change{Head: "three"})
	if rep.Unmergeable == "" || !rep.Failed() || len(f.renders.rendered()) != 0 {
		t.Fatalf("unmergeable %q, failed %v, rendered %v", rep.Unmergeable, rep.Failed(), f.renders.rendered())
	}
	if !strings.Contains(rep.Unmergeable, "deploy/overlays/dev/replicas.yaml") || rep.Summary() != "cannot be merged onto main" {
		t.Errorf("unmergeable %q, summary %q", rep.Unmergeable, rep.Summary())
	}
	if md := rep.Markdown(Format{}); !strings.Contains(md, "cannot be merged") || !strings.Contains(md, "replicas.yaml") {
		t.Errorf("comment:\n%s", md)
	}
}

// A fork's pull request, fetched by the ref the forge keeps for it: a
// kustomization that reads a file outside the repository fails its render,
// names the file, and shows none of it.
func TestAForksPullRequestThatReadsOutsideTheRepositoryFails(t *testing.T) {
	f := newFixture(t)
	head := f.branch("fork", "refs/pull/4/head", map[string]string{
		"deploy/overlays/dev/kustomization.yaml": "namespace: dev\nresources: [../../base]\npatches:\n- path: replicas.yaml\nconfigMapGenerator:\n- name: stolen\n  files: [/etc/passwd]\n",
	})
	rep := f.preview(Change{Head: "refs/pull/4/head", HeadCommit: head})
	if rep.HeadCommit != head {
		t.Errorf("previewed %s, the fork's head is %s", rep.HeadCommit, head)
	}
	if got := names(rep); !slices.Equal(got, []string{"web-dev"}) || !rep.Failed() {
		t.Fatalf("reached %v, failed %v", got, rep.Failed())
	}
	if e := rep.Syncs[0].Error; !strings.Contains(e, "/etc/passwd") {
		t.Errorf("the error does not name the file: %s", e)
	}
	md := rep.Markdown(Format{})
	if strings.Contains(md, "root:") || !strings.Contains(md, "❌") || !strings.Contains(md, "1 render fails") {
		t.Errorf("comment:\n%s", md)
	}
	// A head the forge names that the fetched ref is not at.
	if _, err := Run(context.Background(), f.syncs, Change{Repo: f.srcURL, Base: "main", Head: "refs/pull/4/head", HeadCommit: strings.Repeat("ab", 20)}, Options{Hydrate: f.hydrateOptions()}); err == nil || !strings.Contains(err.Error(), "pushed again meanwhile") {
		t.Errorf("a moved head: %v", err)
	}
}

// A diff larger than a comment may be is cut at a line, within the limit,
// with where to read the rest.
func TestAHugeDiffStaysWithinTheCommentLimit(t *testing.T) {
	f := newFixture(t)
	var big strings.Builder
	big.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  big: |\n")
	for i := range 100_000 {
		big.WriteString("    line " + itoa(i) + " of a file a pull request adds\n")
	}
	f.branch("big", "refs/heads/big", map[string]string{
		"deploy/base/big.yaml":           big.String(),
		"deploy/base/kustomization.yaml": "resources: [deployment.yaml, service.yaml, big.yaml]\n",
	})
	rep, err := Run(context.Background(), f.syncs, Change{Repo: f.srcURL, Base: "main", Head: "big"}, Options{Hydrate: f.hydrateOptions(), DiffLimit: 2 * GitHubLimit})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(rep); !slices.Equal(got, []string{"web-dev", "web-prod"}) {
		t.Fatalf("reached %v", got)
	}
	// What is held of a diff of 100,000 lines: the limit's worth.
	for _, s := range rep.Syncs {
		if len(s.Diff) > 2*GitHubLimit+200 || !strings.Contains(s.Diff, "more lines of the diff of apps/web are left out") {
			t.Errorf("%s: %d bytes of diff held, ending %q", s.Name, len(s.Diff), s.Diff[max(0, len(s.Diff)-200):])
		}
	}
	const more = "The whole diff: `sluice preview --base main --head big`."
	md := rep.Markdown(Format{Limit: GitHubLimit, More: more})
	if len(md) > GitHubLimit {
		t.Errorf("the comment has %d characters, the limit is %d", len(md), GitHubLimit)
	}
	if !strings.Contains(md, more) || !strings.Contains(md, "more lines of this diff are not shown") {
		t.Errorf("the cut comment does not say where the rest is:\n%s", md[len(md)-2000:])
	}
	if !strings.Contains(md, "| ✏️ | web-prod | `apps/web` | 1 | 0 | 0 | 0 |") {
		t.Errorf("the table is not whole:\n%s", md[:2000])
	}
}

func itoa(i int) string { return fmtInt(i) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
