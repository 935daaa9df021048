package render

import (
	"fmt"
	"runtime"

	"helm.sh/helm/v4/pkg/chart/common"

	"sluice.dev/sluice/api/v1alpha1"
)

// The helm release Sluice renders charts like. Its SDK is the module
// helm.sh/helm/v4 of go.mod (a test keeps these in step with it); its
// release binary, built from the same module with helm's Makefile, is
// what Sluice's output is compared with.
const (
	// helmVersion is the release: .Capabilities.HelmVersion.Version.
	helmVersion = "v4.3.2"
	// helmGitCommit is the commit the release binary was built from. The
	// Go module proxy carries none, so a binary built from it names none,
	// and neither does Sluice.
	helmGitCommit = ""
	// helmKubeVersion is the Kubernetes version the release binary
	// assumes without --kube-version: the minor of the client-go it is
	// built with (v0.37 is Kubernetes 1.37), not the SDK's v1.20 of tests.
	helmKubeVersion = "v1.37.0"
	// helmKubeClientVersion is that client-go's Kubernetes minor.
	helmKubeClientVersion = "v1.37"
)

// Capabilities say what a chart is told of the cluster it is rendered for
// (.Capabilities) and what its kubeVersion constraint is checked against.
// The zero value is `helm template`'s defaults.
type Capabilities struct {
	// KubeVersion is the Kubernetes version ("1.31", "v1.31.4"); empty
	// is helm's default, the version its client libraries are for. A
	// sync's render.helm.kubeVersion wins over it.
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions are added to the API versions the chart sees, as
	// `helm template --api-versions` adds them ("monitoring.coreos.com/v1",
	// "monitoring.coreos.com/v1/ServiceMonitor").
	APIVersions []string `json:"apiVersions,omitempty"`
	// ServerAPIVersions, when not nil, replace helm's built-in set: the
	// groups, versions and kinds a cluster serves, as `helm install`
	// reads them from the cluster.
	ServerAPIVersions []string `json:"serverAPIVersions,omitempty"`
}

// helmCapabilities builds the .Capabilities of a render, as helm's release
// binary would with the same flags.
func helmCapabilities(c Capabilities, s v1alpha1.HelmRender) (*common.Capabilities, error) {
	caps := &common.Capabilities{}
	version, field := helmKubeVersion, ""
	switch {
	case s.KubeVersion != "":
		version, field = s.KubeVersion, "render.helm.kubeVersion"
	case c.KubeVersion != "":
		version, field = c.KubeVersion, "the Kubernetes version"
	}
	kv, err := common.ParseKubeVersion(version)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", field, version, err)
	}
	caps.KubeVersion = *kv
	if c.ServerAPIVersions != nil {
		caps.APIVersions = append(common.VersionSet(nil), c.ServerAPIVersions...)
	} else {
		caps.APIVersions = append(common.VersionSet(nil), common.DefaultVersionSet...)
	}
	caps.APIVersions = append(caps.APIVersions, s.APIVersions...)
	caps.APIVersions = append(caps.APIVersions, c.APIVersions...)
	caps.HelmVersion = common.DefaultCapabilities.HelmVersion
	caps.HelmVersion.Version = helmVersion
	caps.HelmVersion.GitCommit = helmGitCommit
	caps.HelmVersion.GitTreeState = "clean"
	caps.HelmVersion.GoVersion = runtime.Version()
	caps.HelmVersion.KubeClientVersion = helmKubeClientVersion
	return caps, nil
}
