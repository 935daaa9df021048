package hydrate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// fixture is a source repository (a kustomize base with dev and prod
// overlays, and a chart with a vendored dependency) and a service deploy
// repository on a real git server, with images in a real registry.
type fixture struct {
	t        *testing.T
	git      *testenv.GitServer
	reg      *testenv.Registry
	app      *testenv.Work // the source repository's working clone
	appURL   string
	dstURL   string
	cacheDir string
	syncDir  string
	digests  map[string]string
}

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: REG/team/web:latest
      - name: proxy
        image: REG/other/proxy:1.0
`

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, git: testenv.NewGitServer(t), reg: testenv.NewRegistry(t), cacheDir: t.TempDir(), syncDir: t.TempDir(), digests: map[string]string{}}
	f.digests["web:dev"] = f.reg.Push(t, "team/web:dev")
	f.digests["web:prod"] = f.reg.Push(t, "team/web:prod")
	f.digests["shop:1.0"] = f.reg.Push(t, "team/shop:1.0")
	f.appURL = f.git.CreateRepo(t, "app")
	f.app = testenv.NewWork(t, f.appURL)
	f.app.Write(f.expand(map[string]string{
		"deploy/base/kustomization.yaml":             "resources: [deployment.yaml, service.yaml]\n",
		"deploy/base/deployment.yaml":                deployment,
		"deploy/base/service.yaml":                   "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  selector: {app: web}\n  ports: [{port: 80}]\n",
		"deploy/overlays/dev/kustomization.yaml":     "namespace: dev\nresources: [../../base]\npatches:\n- path: replicas.yaml\n",
		"deploy/overlays/dev/replicas.yaml":          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
		"deploy/overlays/prod/kustomization.yaml":    "namespace: prod\nresources: [../../base]\n",
		"charts/shop/Chart.yaml":                     "apiVersion: v2\nname: shop\nversion: 0.1.0\ndependencies:\n- name: cache\n  version: 0.1.0\n",
		"charts/shop/values.yaml":                    "image: REG/team/shop:1.0\nreplicas: 1\n",
		"charts/shop/templates/deploy.yaml":          "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: {{ .Release.Name }}}\nspec:\n  replicas: {{ .Values.replicas }}\n  selector: {matchLabels: {app: shop}}\n  template:\n    metadata: {labels: {app: shop}}\n    spec:\n      containers:\n      - {name: shop, image: {{ .Values.image }}}\n",
		"charts/shop/charts/cache/Chart.yaml":        "apiVersion: v2\nname: cache\nversion: 0.1.0\n",
		"charts/shop/charts/cache/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-cache}\ndata: {size: 1Gi}\n",
		"README.md": "# app\n",
	})).Commit("app sources")
	f.app.Push("main")
	f.dstURL = f.git.CreateRepo(t, "service-deploy")
	d := testenv.NewWork(t, f.dstURL)
	d.Write(map[string]string{"README.md": "# service deploy\n", "apps/hand-written/cm.yaml": "kind: ConfigMap\n"}).Commit("init")
	d.Push("main")
	return f
}

func (f *fixture) expand(files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = strings.ReplaceAll(v, "REG", f.reg.Host)
	}
	return out
}

// sync writes a ManifestSync file; %REG, %APP and %DST are replaced.
func (f *fixture) sync(name, yaml string) {
	f.t.Helper()
	reg := ""
	if f.reg != nil {
		reg = f.reg.Host
	}
	r := strings.NewReplacer("REG", reg, "APP", f.appURL, "DST", f.dstURL)
	if err := os.WriteFile(filepath.Join(f.syncDir, name+".yaml"), []byte(r.Replace(yaml)), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

const devSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web-dev}
spec:
  source: {repo: APP, ref: main, path: deploy/overlays/dev}
  images:
  - name: REG/team/*
    tag: dev
  destination: {repo: DST, branch: env/dev, path: apps/web}
`

const shopSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: shop-dev}
spec:
  source: {repo: APP, path: charts/shop}
  render:
    helm: {releaseName: shop, values: {replicas: 3}}
  images:
  - name: REG/team/shop
  destination: {repo: DST, branch: env/dev, path: apps/shop}
`

func (f *fixture) options() Options {
	reg := registry.New()
	return Options{
		Cache:    source.NewCache(f.cacheDir),
		Registry: reg,
		Charts:   &render.Charts{Registry: reg},
		StateDir: f.cacheDir,
	}
}

// run hydrates every sync written, with fresh Options (a new run), and
// fails the test if the run could not start.
func (f *fixture) run(mod ...func(*Options)) *Report {
	f.t.Helper()
	o := f.options()
	for _, m := range mod {
		m(&o)
	}
	set, err := config.Load(f.syncDir)
	if err != nil {
		f.t.Fatal(err)
	}
	rep, err := Run(context.Background(), set.ManifestSyncs, o)
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

func (f *fixture) result(rep *Report, name string) Result {
	f.t.Helper()
	for _, r := range rep.Results {
		if r.Name == name {
			return r
		}
	}
	f.t.Fatalf("no result for %s", name)
	return Result{}
}

// dstGit runs git in the server's bare destination repository.
func (f *fixture) dstGit(args ...string) string {
	f.t.Helper()
	return testenv.Git(f.t, filepath.Join(f.git.Root, "service-deploy.git"), args...)
}
