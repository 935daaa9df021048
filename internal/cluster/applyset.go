package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ApplySet labels and annotations of KEP-3659, as kubectl reads them.
const (
	labelApplySetID       = "applyset.kubernetes.io/id"
	labelPartOf           = "applyset.kubernetes.io/part-of"
	annotationTooling     = "applyset.kubernetes.io/tooling"
	annotationGroupKinds  = "applyset.kubernetes.io/contains-group-kinds"
	annotationNamespaces  = "applyset.kubernetes.io/additional-namespaces"
	toolingValue          = "sluice/v1alpha1"
	applySetIDFormat      = "applyset-%s-v1"
	inventoryDefaultKind  = "Secret"
	inventoryConfigMapKey = "ConfigMap"
)

// Inventory is the parent object of an ApplySet: a Secret (or ConfigMap)
// whose labels and annotations say which objects belong to the set, so
// the next apply can prune what the source no longer has. kubectl's own
// ApplySet tooling reads the same record.
type Inventory struct {
	Kind      string // Secret or ConfigMap
	Name      string
	Namespace string
}

// ParseInventory reads "NAME", "secret/NAME" or "configmap/NAME".
func ParseInventory(s, namespace string) (Inventory, error) {
	inv := Inventory{Kind: inventoryDefaultKind, Name: s, Namespace: namespace}
	if kind, name, ok := strings.Cut(s, "/"); ok {
		switch strings.ToLower(kind) {
		case "secret", "secrets":
		case "configmap", "configmaps", "cm":
			inv.Kind = inventoryConfigMapKey
		default:
			return inv, fmt.Errorf("inventory %q: the parent must be a secret or a configmap", s)
		}
		inv.Name = name
	}
	if inv.Name == "" {
		return inv, fmt.Errorf("inventory %q: no name", s)
	}
	if inv.Namespace == "" {
		inv.Namespace = "default"
	}
	return inv, nil
}

// ID is the ApplySet ID KEP-3659 derives from the parent:
// applyset-<base64url(sha256(name.namespace.kind.group))>-v1.
func (inv Inventory) ID() string {
	sum := sha256.Sum256([]byte(strings.Join([]string{inv.Name, inv.Namespace, inv.Kind, ""}, ".")))
	return fmt.Sprintf(applySetIDFormat, base64.RawURLEncoding.EncodeToString(sum[:]))
}

// String is the kubectl form of the parent, "secret/NAME".
func (inv Inventory) String() string { return strings.ToLower(inv.Kind) + "/" + inv.Name }

func (inv Inventory) parent() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind(inv.Kind)
	u.SetName(inv.Name)
	u.SetNamespace(inv.Namespace)
	return u
}

// record is what an inventory parent says.
type record struct {
	groupKinds map[schema.GroupKind]bool
	namespaces map[string]bool
	exists     bool
}

func (c *Client) readInventory(ctx context.Context, inv Inventory) (*record, error) {
	rec := &record{groupKinds: map[schema.GroupKind]bool{}, namespaces: map[string]bool{}}
	u := inv.parent()
	err := c.client.Get(ctx, client.ObjectKeyFromObject(u), u)
	if apierrors.IsNotFound(err) {
		return rec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading inventory %s: %w", inv, reachable(c.config, err))
	}
	if id := u.GetLabels()[labelApplySetID]; id != inv.ID() {
		return nil, fmt.Errorf("%s/%s exists but is not this inventory's ApplySet parent (its %s label is %q): choose another --inventory name", inv.Namespace, inv, labelApplySetID, id)
	}
	if tool := u.GetAnnotations()[annotationTooling]; tool != "" && !strings.HasPrefix(tool, "sluice/") {
		return nil, fmt.Errorf("inventory %s is managed by %s, not Sluice", inv, tool)
	}
	rec.exists = true
	for _, gk := range splitList(u.GetAnnotations()[annotationGroupKinds]) {
		rec.groupKinds[schema.ParseGroupKind(gk)] = true
	}
	for _, ns := range splitList(u.GetAnnotations()[annotationNamespaces]) {
		rec.namespaces[ns] = true
	}
	return rec, nil
}

// covers reports whether r records every group kind and namespace of o.
func (r *record) covers(o *record) bool {
	for gk := range o.groupKinds {
		if !r.groupKinds[gk] {
			return false
		}
	}
	for ns := range o.namespaces {
		if !r.namespaces[ns] && ns != "" {
			return false
		}
	}
	return true
}

// equals reports whether r and o record the same.
func (r *record) equals(o *record) bool { return r.covers(o) && o.covers(r) }

// writeInventory records the group kinds and namespaces of the set on the
// parent, creating it if need be.
func (c *Client) writeInventory(ctx context.Context, inv Inventory, rec *record) error {
	u := inv.parent()
	u.SetLabels(map[string]string{labelApplySetID: inv.ID()})
	var gks, nss []string
	for gk := range rec.groupKinds {
		s := gk.Kind
		if gk.Group != "" {
			s += "." + gk.Group
		}
		gks = append(gks, s)
	}
	for ns := range rec.namespaces {
		if ns != inv.Namespace && ns != "" {
			nss = append(nss, ns)
		}
	}
	sort.Strings(gks)
	sort.Strings(nss)
	annotations := map[string]string{
		annotationTooling:    toolingValue,
		annotationGroupKinds: strings.Join(gks, ","),
	}
	if len(nss) > 0 {
		annotations[annotationNamespaces] = strings.Join(nss, ",")
	}
	u.SetAnnotations(annotations)
	err := c.client.Patch(ctx, u, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("writing inventory %s: %w", inv, reachable(c.config, err))
	}
	return nil
}

// members lists the objects the cluster holds as members of the ApplySet.
// listed, if not nil, holds lists already made (by listKey).
func (c *Client) members(ctx context.Context, inv Inventory, rec *record, listed map[string][]*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	namespaces := []string{inv.Namespace}
	for ns := range rec.namespaces {
		if ns != inv.Namespace {
			namespaces = append(namespaces, ns)
		}
	}
	sort.Strings(namespaces[1:])
	gks := make([]schema.GroupKind, 0, len(rec.groupKinds))
	for gk := range rec.groupKinds {
		gks = append(gks, gk)
	}
	sort.Slice(gks, func(i, j int) bool { return gks[i].String() < gks[j].String() })
	var mu sync.Mutex
	eg, ctx := errgroup.WithContext(ctx)
	eg.SetLimit(16)
	for _, gk := range gks {
		mapping, err := c.mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			continue // the kind is gone (its CRD deleted): so are its objects
		}
		if err != nil {
			return nil, err
		}
		list := func(ns string) error {
			if items, ok := listed[listKey(gk, ns)]; ok {
				mu.Lock()
				out = append(out, items...)
				mu.Unlock()
				return nil
			}
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
			opts := []client.ListOption{client.MatchingLabels{labelPartOf: inv.ID()}}
			if ns != "" {
				opts = append(opts, client.InNamespace(ns))
			}
			if err := c.client.List(ctx, l, opts...); err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("listing %s of inventory %s: %w", gk, inv, reachable(c.config, err))
			}
			mu.Lock()
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			mu.Unlock()
			return nil
		}
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			eg.Go(func() error { return list("") })
			continue
		}
		for _, ns := range namespaces {
			eg.Go(func() error { return list(ns) })
		}
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return RefOf(out[i]).String() < RefOf(out[j]).String() })
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
