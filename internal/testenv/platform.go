package testenv

import (
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// Platform is a code repository holding app sources, kustomize overlays
// and the Sluice resources that deploy them (two ManifestSyncs labelled
// env: dev and env: prod, two Images), an empty deploy repository, and a
// registry with a base image: what RepoConfig and takeover tests start
// from.
type Platform struct {
	T                  TB
	Git                *GitServer
	Reg                *Registry
	Code               *Work
	CodeURL, DeployURL string
	Dir                string // where RepoConfig files are written
	Cache              string
}

// NewPlatform builds it.
func NewPlatform(t TB) *Platform {
	f := &Platform{T: t, Git: NewGitServer(t), Reg: NewRegistry(t), Dir: t.TempDir(), Cache: t.TempDir()}
	img, _ := random.Image(256, 1)
	img, _ = mutate.Config(img, v1.Config{Env: []string{"PATH=/bin"}})
	f.Reg.PushImage(t, "base/static:latest", img)
	f.CodeURL = f.Git.CreateRepo(t, "code")
	f.DeployURL = f.Git.CreateRepo(t, "deploy")
	d := NewWork(t, f.DeployURL)
	d.Write(map[string]string{"README.md": "deploy\n"}).Commit("init")
	d.Push("main")
	f.Code = NewWork(t, f.CodeURL)
	f.Code.Write(f.Expand(map[string]string{
		"bin/guestbook":                          "guestbook v1\n",
		"bin/worker":                             "worker v1\n",
		"deploy/base/kustomization.yaml":         "resources: [apps.yaml]\n",
		"deploy/base/apps.yaml":                  platformDeployment("guestbook") + "---\n" + platformDeployment("worker"),
		"deploy/overlays/dev/kustomization.yaml": "namespace: dev\nresources: [../../base, banner.yaml]\n",
		"deploy/overlays/dev/banner.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: banner}\ndata: {text: main}\n",
		"deploy/sluice/syncs.yaml":               platformSyncs,
		"deploy/sluice/images.yaml":              platformImages,
	}))
	os.Chmod(filepath.Join(f.Code.Dir, "bin/guestbook"), 0o755)
	f.Code.Commit("code")
	f.Code.Push("main")
	return f
}

func platformDeployment(name string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `}
spec:
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: app, image: REG/team/` + name + `}]}
`
}

const platformSyncs = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: apps-dev, labels: {env: dev}}
spec:
  source: {repo: CODE, ref: main, path: deploy/overlays/dev}
  images: [{name: REG/team/*, strategy: sourceCommit}]
  destination: {repo: DEPLOY, branch: env/dev, path: apps}
---
apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: apps-prod, labels: {env: prod}}
spec:
  source: {repo: CODE, ref: main, path: deploy/overlays/dev}
  images: [{name: REG/team/*, strategy: sourceCommit}]
  destination: {repo: DEPLOY, branch: env/prod, path: apps}
`

const platformImages = `apiVersion: sluice.dev/v1alpha1
kind: Image
metadata: {name: guestbook, labels: {env: dev}}
spec:
  image: REG/team/guestbook
  base: REG/base/static:latest
  source: [{repo: CODE, ref: main, mappings: [{src: bin/guestbook, dest: /app/guestbook}]}]
  config: {entrypoint: [/app/guestbook]}
---
apiVersion: sluice.dev/v1alpha1
kind: Image
metadata: {name: worker, labels: {env: dev}}
spec:
  image: REG/team/worker
  base: REG/base/static:latest
  source: [{repo: CODE, ref: main, mappings: [{src: bin/worker, dest: /app/worker}]}]
`

// Expand replaces REG, CODE and DEPLOY.
func (f *Platform) Expand(files map[string]string) map[string]string {
	r := strings.NewReplacer("REG", f.Reg.Host, "CODE", f.CodeURL, "DEPLOY", f.DeployURL)
	out := map[string]string{}
	for k, v := range files {
		out[k] = r.Replace(v)
	}
	return out
}

// RepoConfig writes a RepoConfig file (REG, CODE and DEPLOY replaced) and
// returns its path.
func (f *Platform) RepoConfig(name, overrides string) string {
	f.T.Helper()
	y := f.Expand(map[string]string{"x": `apiVersion: sluice.dev/v1alpha1
kind: RepoConfig
metadata: {name: platform}
spec:
  repo: CODE
  ref: main
  globs: ["deploy/sluice/*.yaml"]
  selectors: [{matchLabels: {env: dev}}]
` + overrides})["x"]
	p := filepath.Join(f.Dir, name)
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		f.T.Fatalf("%v", err)
	}
	return p
}

// Show returns a file of the deploy repository at a revision.
func (f *Platform) Show(rev, path string) string {
	f.T.Helper()
	return Show(f.T, filepath.Join(f.Git.Root, "deploy.git"), rev, path)
}
