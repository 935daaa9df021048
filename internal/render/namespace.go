package render

import (
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ReleaseNamespace puts the objects of a chart's render that have no
// namespace in the release's, as `helm install` creates them there
// (`helm template` prints them without one, and a tool that applies a
// folder as it is would refuse them, or use another). Cluster-scoped
// kinds are left alone: Kubernetes' own, as kustomize knows them, and
// those a CustomResourceDefinition of the render defines with scope
// Cluster; any other kind is taken for a namespaced one, as kustomize's
// namespace transformer takes it.
func ReleaseNamespace(objs []*yaml.RNode, namespace string) {
	if namespace == "" {
		namespace = "default" // helm's
	}
	cluster := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		scope, _ := o.Pipe(yaml.Lookup("spec", "scope"))
		group, _ := o.Pipe(yaml.Lookup("spec", "group"))
		kind, _ := o.Pipe(yaml.Lookup("spec", "names", "kind"))
		if scope != nil && group != nil && kind != nil && yaml.GetValue(scope) == "Cluster" {
			cluster[yaml.GetValue(group)+"/"+yaml.GetValue(kind)] = true
		}
	}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		tm := yaml.TypeMeta{APIVersion: o.GetApiVersion(), Kind: o.GetKind()}
		group, _, grouped := strings.Cut(tm.APIVersion, "/")
		if !grouped {
			group = "" // the core group
		}
		if openapi.IsCertainlyClusterScoped(tm) || cluster[group+"/"+tm.Kind] {
			continue
		}
		_ = o.SetNamespace(namespace)
	}
}
