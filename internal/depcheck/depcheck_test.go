// Package depcheck holds the tests that keep the repository in shape:
// each package imports only the packages below it, and git tracks no
// build output.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// layers lists, for each package, the Sluice packages it may import.
var layers = map[string][]string{
	"api/v1alpha1":         {},
	"internal/anchors":     {},
	"internal/mask":        {},
	"internal/egress":      {},
	"internal/backoff":     {},
	"internal/testenv":     {"internal/devcluster"},
	"internal/source":      {"internal/egress", "api/v1alpha1", "internal/backoff"},
	"internal/registry":    {"internal/backoff"},
	"internal/ociartifact": {},
	"internal/artifactsig": {},
	"internal/config":      {"internal/egress", "api/v1alpha1", "internal/anchors", "internal/source"},
	"internal/render":      {"internal/egress", "api/v1alpha1", "internal/anchors", "internal/source", "internal/registry", "internal/mask"},
	"internal/sandbox":     {"api/v1alpha1", "internal/anchors", "internal/egress", "internal/source", "internal/registry", "internal/render", "internal/mask"},
	"internal/pin":         {"internal/egress", "api/v1alpha1", "internal/registry"},
	"internal/imagesig":    {"api/v1alpha1", "internal/registry"},
	"internal/signing":     {},
	"internal/synckey":     {},
	"internal/hooks":       {"api/v1alpha1", "internal/render"},
	"internal/secrets":     {"api/v1alpha1"},
	"internal/destination": {"internal/egress", "api/v1alpha1", "internal/source", "internal/signing"},
	"internal/devcluster":  {"config/crd"},
	"internal/cluster":     {"api/v1alpha1", "internal/secrets"},
	"internal/build":       {"internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/config"},
	"internal/override":    {"internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/config", "internal/pin"},
	"internal/repoconfig":  {"internal/sandbox", "internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/config", "internal/pin", "internal/override", "internal/render", "internal/destination", "internal/hydrate", "internal/build"},
	"internal/takeover":    {"internal/sandbox", "internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/config", "internal/pin", "internal/override", "internal/render", "internal/destination", "internal/hydrate", "internal/build", "internal/repoconfig"},
	"internal/owner":       {"internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/render", "internal/cluster", "internal/secrets"},
	"internal/session":     {"internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/render", "internal/cluster", "internal/deploy", "internal/owner", "internal/hooks"},
	"internal/deploy":      {"internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/render", "internal/cluster", "internal/hooks", "internal/synckey"},
	"internal/forge":       {"internal/egress", "api/v1alpha1"},
	// Makes releases of Sluice; nothing of Sluice runs in it.
	"internal/release": {},
	"internal/hydrate": {"internal/sandbox", "internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/config", "internal/override", "internal/forge",
		"internal/render", "internal/pin", "internal/destination", "internal/signing", "internal/imagesig", "internal/synckey", "internal/hooks", "internal/secrets", "internal/ociartifact", "internal/artifactsig", "internal/mask"},
	// The dashboard reads what the controller and sessions write.
	"internal/dashboard":   {"internal/sandbox", "internal/egress", "api/v1alpha1", "internal/cluster", "internal/session", "internal/preview", "internal/hydrate", "internal/source", "internal/registry", "internal/review", "internal/config", "internal/forge", "internal/synckey"},
	"internal/credentials": {"internal/egress", "api/v1alpha1", "internal/artifactsig", "internal/source", "internal/signing", "internal/imagesig", "internal/registry", "internal/synckey", "internal/forge"},
	"internal/preview":     {"internal/sandbox", "internal/egress", "api/v1alpha1", "internal/config", "internal/credentials", "internal/destination", "internal/hydrate", "internal/registry", "internal/render", "internal/source", "internal/review", "internal/forge", "internal/synckey"},
	"internal/review":      {"internal/sandbox", "internal/egress", "api/v1alpha1", "internal/config", "internal/hydrate", "internal/source", "internal/forge", "internal/synckey"},
	// The controller drives the engines; nothing below knows of it.
	"internal/controller": {"internal/backoff", "internal/sandbox", "internal/egress", "api/v1alpha1", "internal/source", "internal/registry", "internal/config", "internal/override", "internal/signing", "internal/imagesig",
		"internal/render", "internal/destination", "internal/hydrate", "internal/build", "internal/repoconfig", "internal/credentials", "internal/preview", "internal/dashboard", "internal/synckey", "internal/review", "internal/forge", "internal/artifactsig"},
}

func TestPackagesImportOnlyDownward(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "sluice.dev/sluice/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "sluice.dev/sluice/"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		allowed, known := layers[pkg]
		if !known {
			if strings.HasPrefix(pkg, "internal/") && pkg != "internal/depcheck" {
				t.Errorf("package %s is not in the layer table: add it", pkg)
			}
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			dep := strings.TrimPrefix(imp, mod)
			ok := false
			for _, a := range allowed {
				ok = ok || a == dep
			}
			if !ok {
				t.Errorf("%s imports %s, which is not below it", pkg, dep)
			}
		}
	}
}
