package owner

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
)

var argoApplicationKind = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

// Applied is what an owner applied from its folder, as its tool records
// it: a Flux Kustomization's status.inventory, an Argo CD Application's
// status.resources. What a render of the folder lacks of it is what the
// tool would prune were the tree committed. It is nil for an Application
// of several sources, whose resources are not the folder's alone.
func Applied(ctx context.Context, c *cluster.Client, own Owner) ([]cluster.Ref, error) {
	var gvk schema.GroupVersionKind
	var ref cluster.Ref
	switch o := own.(type) {
	case *Flux:
		gvk, ref = FluxKustomizationKind, o.Ref
	case *Argo:
		if !o.single {
			return nil, nil
		}
		gvk, ref = argoApplicationKind, o.Ref
	default:
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Kube().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return nil, fmt.Errorf("reading what %s applied: %w", own.Name(), err)
	}
	var out []cluster.Ref
	if gvk == FluxKustomizationKind {
		entries, _, _ := unstructured.NestedSlice(u.Object, "status", "inventory", "entries")
		for _, e := range entries {
			m, _ := e.(map[string]any)
			id, _ := m["id"].(string)
			v, _ := m["v"].(string)
			p := strings.Split(id, "_") // NAMESPACE_NAME_GROUP_KIND
			if len(p) != 4 || v == "" {
				continue
			}
			out = append(out, cluster.Ref{Group: p[2], Version: v, Kind: p[3], Namespace: p[0], Name: p[1]})
		}
		return out, nil
	}
	resources, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for _, r := range resources {
		m, _ := r.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		if str("kind") == "" || str("name") == "" || str("version") == "" {
			continue
		}
		out = append(out, cluster.Ref{Group: str("group"), Version: str("version"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name")})
	}
	return out, nil
}
