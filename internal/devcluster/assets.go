package devcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// AssetsEnv names a directory holding kube-apiserver, etcd and
// kube-controller-manager, to use instead of building them.
const AssetsEnv = "SLUICE_KUBE_ASSETS"

// Assets returns the directory holding the control plane's binaries. Unless
// $SLUICE_KUBE_ASSETS names one, it runs hack/kube/build.sh of the Sluice
// source tree holding dir (or the working directory), which builds what is
// missing into bin/ (when build is set; otherwise it fails saying how to
// build it) and returns at once when all is there.
func Assets(ctx context.Context, dir string, build bool) (string, error) {
	if d := os.Getenv(AssetsEnv); d != "" {
		for _, b := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
			if _, err := os.Stat(filepath.Join(d, b)); err != nil {
				return "", fmt.Errorf("$%s=%s: %w", AssetsEnv, d, err)
			}
		}
		return d, nil
	}
	root, err := sourceRoot(dir)
	if err != nil {
		return "", err
	}
	var out, errb bytes.Buffer
	var args []string
	if !build {
		args = append(args, "--check")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kube", "build.sh"), args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if !build {
			return "", fmt.Errorf("%s", strings.TrimSpace(errb.String()))
		}
		return "", fmt.Errorf("building the control plane (hack/kube/build.sh): %w\n%s", err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// sourceRoot finds the Sluice source tree at or above dir (the working
// directory when empty), or else the one this binary was built from, when
// it still exists: `go install ./cmd/...` records its source files' paths
// (a -trimpath build, such as the image's, does not), so that `sluice dev
// cluster` run from any directory finds the tools `make tools` built.
func sourceRoot(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	if root, ok := treeAbove(dir); ok {
		return root, nil
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if root, ok := treeAbove(filepath.Dir(file)); ok {
			return root, nil
		}
	}
	return "", fmt.Errorf("no Sluice source tree (hack/kube/build.sh) at or above %s: set $%s to a directory holding kube-apiserver, etcd and kube-controller-manager", dir, AssetsEnv)
}

// treeAbove finds the directory at or above dir holding hack/kube/build.sh.
func treeAbove(dir string) (string, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "kube", "build.sh")); err == nil {
			return d, true
		}
		if filepath.Dir(d) == d {
			return "", false
		}
	}
}

// crdModules are the projects whose CRDs the cluster installs, at the
// versions known to download here, and where in each module they are.
var crdModules = []struct{ module, version, dir string }{
	{"github.com/fluxcd/kustomize-controller", "v1.9.6", "config/crd/bases"},
	{"github.com/fluxcd/source-controller", "v1.9.6", "config/crd/bases"},
	{"github.com/fluxcd/helm-controller", "v1.6.4", "config/crd/bases"},
	{"github.com/argoproj/argo-cd/v3", "v3.5.7", "manifests/crds"},
}

// CRDs returns the directories of the Flux (Kustomization, HelmRelease,
// GitRepository, OCIRepository, Bucket, HelmRepository, HelmChart) and
// Argo CD (Application, AppProject, ApplicationSet) CRDs, downloading
// their modules into the module cache when missing.
func CRDs(ctx context.Context) ([]string, error) {
	var dirs []string
	for _, m := range crdModules {
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", m.module+"@"+m.version)
		cmd.Dir = os.TempDir() // outside any module: nothing is added to a go.sum
		out, err := cmd.Output()
		var info struct{ Dir, Error string }
		json.Unmarshal(out, &info)
		if err != nil || info.Dir == "" {
			return nil, fmt.Errorf("downloading %s@%s for its CRDs: %v %s", m.module, m.version, err, info.Error)
		}
		dirs = append(dirs, filepath.Join(info.Dir, filepath.FromSlash(m.dir)))
	}
	return dirs, nil
}
