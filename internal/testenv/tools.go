package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sluice.dev/sluice/internal/devcluster"
)

// HelmBinary returns the reference helm binary that `make tools` builds
// (hack/helm/build.sh: the release of go.mod's helm.sh/helm/v4, with
// helm's own release ldflags). Tests compare Sluice's renders with it; a
// test never builds it, so when it is missing the test fails saying how
// to build it.
func HelmBinary(t TB) string {
	t.Helper()
	return tool(t, "helm", "helm.sh/helm/v4", "hack/helm/build.sh")
}

// KustomizeBinary returns the kustomize CLI that `make tools` builds
// (hack/kustomize/build.sh: the release matching go.mod's
// sigs.k8s.io/kustomize/api), that Sluice's kustomize output is compared
// with.
func KustomizeBinary(t TB) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	api, err := devcluster.RequiredVersion(filepath.Join(root, "go.mod"), "sigs.k8s.io/kustomize/api")
	if err != nil {
		t.Fatalf("%v", err)
	}
	releases := map[string]string{"v0.21.2": "v5.8.2"} // as hack/kustomize/build.sh
	p := filepath.Join(root, "bin", "kustomize", releases[api], "kustomize")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kustomize %s is not built: run `make tools` (or hack/kustomize/build.sh) first; `make test` does", releases[api])
	}
	return p
}

// ControllerGen returns the controller-gen that `make tools` builds
// (hack/controller-gen/build.sh, at the version of its VERSION file).
func ControllerGen(t TB) string {
	t.Helper()
	return versionedTool(t, "controller-gen")
}

// tool finds bin/NAME/VERSION/NAME in the source tree, VERSION being the
// version go.mod requires of module.
func tool(t TB, name, module, script string) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	version, err := devcluster.RequiredVersion(filepath.Join(root, "go.mod"), module)
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(root, "bin", name, version, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s %s is not built: run `make tools` (or %s) first; `make test` does", name, version, script)
	}
	return p
}

// SourceRoot is the Sluice source tree holding the working directory.
func SourceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.HasPrefix(string(data), "module sluice.dev/sluice\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no Sluice source tree at or above %s", dir)
		}
	}
}

// ImageBinary returns the static binary of Sluice's own image that `make
// tools` builds (bin/image/sluice, from this source tree).
func ImageBinary(t TB) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(root, "bin", "image", "sluice")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("bin/image/sluice is not built: run `make tools` (or make bin/image/sluice) first; `make test` does")
	}
	return p
}

// versionedTool finds bin/NAME/VERSION/NAME in the source tree, VERSION
// being what hack/NAME/VERSION says (a tool go.mod does not require).
func versionedTool(t TB, name string) string {
	t.Helper()
	return versionedToolIn(t, name, name)
}

// versionedToolIn finds bin/NAME/VERSION/BINARY: a tool of several
// binaries.
func versionedToolIn(t TB, name, binary string) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	v, err := os.ReadFile(filepath.Join(root, "hack", name, "VERSION"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(root, "bin", name, strings.TrimSpace(string(v)), binary)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built: run `make tools` (or hack/%s/build.sh) first; `make test` does", binary, name)
	}
	return p
}

// PromtoolBinary returns Prometheus's promtool that `make tools` builds
// (hack/promtool).
func PromtoolBinary(t TB) string {
	t.Helper()
	return versionedTool(t, "promtool")
}

// CosignBinary returns the cosign CLI that `make tools` builds
// (hack/cosign/build.sh, at the version of its VERSION file).
func CosignBinary(t TB) string {
	t.Helper()
	return versionedTool(t, "cosign")
}

// NotationBinary is the Notation CLI `make tools` builds
// (hack/notation).
func NotationBinary(t TB) string {
	t.Helper()
	return versionedTool(t, "notation")
}
