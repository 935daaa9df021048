package cluster

import (
	"context"
	"fmt"
	"path"
	"sort"

	"k8s.io/client-go/discovery"
)

// Capabilities are what the API server says of itself: its version, and
// the API versions it serves ("apps/v1") with each kind in them
// ("apps/v1/Deployment"), as `helm install` reads them for a chart's
// .Capabilities.
type Capabilities struct {
	Version     string
	APIVersions []string
}

// ServerCapabilities asks the API server for its Capabilities. A group
// whose discovery fails (an aggregated API whose service is down) is left
// out, as helm leaves it out.
func (c *Client) ServerCapabilities(ctx context.Context) (Capabilities, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.config)
	if err != nil {
		return Capabilities{}, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return Capabilities{}, reachable(c.config, fmt.Errorf("asking the API server its version: %w", err))
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return Capabilities{}, reachable(c.config, fmt.Errorf("asking the API server what it serves: %w", err))
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, gv := range g.Versions {
			seen[gv.GroupVersion] = true
		}
	}
	for _, r := range resources {
		for _, res := range r.APIResources {
			seen[path.Join(r.GroupVersion, res.Kind)] = true
		}
	}
	out := Capabilities{Version: v.GitVersion, APIVersions: make([]string, 0, len(seen))}
	for k := range seen {
		out.APIVersions = append(out.APIVersions, k)
	}
	sort.Strings(out.APIVersions)
	return out, ctx.Err()
}
