package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

// TestGeneratedFilesAreUpToDate: the DeepCopy methods and the CRDs are
// generated from these types by `make generate`; a change to the types
// without it fails here.
func TestGeneratedFilesAreUpToDate(t *testing.T) {
	cg := testenv.ControllerGen(t)
	root, err := testenv.SourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	gen := func(args ...string) []byte {
		cmd := exec.Command(cg, args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("controller-gen %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	stale := "is not what `make generate` makes of the types: run it"
	if got, _ := os.ReadFile("zz_generated.deepcopy.go"); !bytes.Equal(got, gen("object", "paths=./api/...", "output:object:stdout")) {
		t.Errorf("api/v1alpha1/zz_generated.deepcopy.go %s", stale)
	}
	var want bytes.Buffer
	for _, doc := range strings.Split(string(gen("crd", "paths=./api/...", "output:crd:stdout")), "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		name := ""
		for _, line := range strings.Split(doc, "\n") {
			if n, ok := strings.CutPrefix(line, "  name: "); ok {
				name = n
				break
			}
		}
		dir := "bases"
		if name == "runconfigs.sluice.dev" {
			dir = "files" // a file of the command line, not a resource of the cluster
		}
		got, err := os.ReadFile(filepath.Join(root, "config", "crd", dir, "sluice.dev_"+strings.TrimSuffix(name, ".sluice.dev")+".yaml"))
		if err != nil || strings.TrimSpace(strings.TrimPrefix(string(got), "---\n")) != strings.TrimSpace(doc) {
			t.Errorf("config/crd/%s: the CRD %s %s", dir, name, stale)
		}
		want.WriteString(name)
	}
	if !strings.Contains(want.String(), "manifestsyncs.sluice.dev") {
		t.Errorf("no ManifestSync CRD generated")
	}
	role := gen("rbac:roleName=sluice-controller", "paths=./internal/controller/...", "output:rbac:stdout")
	if got, _ := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml")); strings.TrimSpace(strings.TrimPrefix(string(got), "---\n")) != strings.TrimSpace(strings.TrimPrefix(string(role), "---\n")) {
		t.Errorf("config/rbac/role.yaml (the controller's ClusterRole, from its rbac markers) %s", stale)
	}
}
