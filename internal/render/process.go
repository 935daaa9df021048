package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"sigs.k8s.io/kustomize/kyaml/openapi"
)

// ProcessState is a digest of what of this process a render can change
// and the next render would see: kyaml's process-wide OpenAPI schema (a
// kustomization's `openapi` field, its own or a base's, replaces it for
// every later build), Helm's default capabilities, the environment and
// the working directory. A process that renders again only when its
// state is back to what it was before its first render (ResetProcessState,
// then this compared) carries nothing from one render to the next.
//
// Of kyaml's schema it takes what a kustomization can set (the version,
// or a custom schema, by SetSchema: kustomize changes it in no other
// way), not the definitions parsed: it parses nothing (a parse is tens of
// milliseconds, and many renders need none).
func ProcessState() string {
	h := sha256.New()
	schemas.Lock()
	defer schemas.Unlock()
	fmt.Fprintf(h, "openapi %q\n", openapi.GetSchemaVersion())
	caps := common.DefaultCapabilities
	fmt.Fprintf(h, "helm %q %q %d\n", caps.KubeVersion.Version, caps.HelmVersion.Version, len(caps.APIVersions))
	for _, v := range caps.APIVersions {
		fmt.Fprintf(h, "api %q\n", v)
	}
	wd, _ := os.Getwd()
	fmt.Fprintf(h, "wd %q\nenv %q\n", wd, strings.Join(os.Environ(), "\x00"))
	return hex.EncodeToString(h.Sum(nil))
}

// ResetProcessState drops what a render may have set of this process's
// kustomize state: kyaml's OpenAPI schema goes back to the built-in one
// (parsed again when next needed).
func ResetProcessState() {
	schemas.Lock()
	defer schemas.Unlock()
	openapi.ResetOpenAPI()
}
