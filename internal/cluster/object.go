package cluster

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Object is one object to apply, with the source file it came from.
type Object struct {
	*unstructured.Unstructured
	// Origin is the file (and line) of the source, for error messages.
	Origin string
}

// Ref identifies an object.
type Ref struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RefOf returns the Ref of an object.
func RefOf(u *unstructured.Unstructured) Ref {
	gvk := u.GroupVersionKind()
	return Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// GroupKind is the ref's group and kind.
func (r Ref) GroupKind() schema.GroupKind { return schema.GroupKind{Group: r.Group, Kind: r.Kind} }

// String is the kubectl form: "deployment.apps/web", "configmap/settings".
func (r Ref) String() string {
	s := strings.ToLower(r.Kind)
	if r.Group != "" {
		s += "." + r.Group
	}
	return s + "/" + r.Name
}

// Subject is the Kind/namespace/name form fluxcd/pkg/ssa uses in errors.
func (r Ref) Subject() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return fmt.Sprintf("%s/%s/%s", r.Kind, r.Namespace, r.Name)
}

// Key identifies an object regardless of version.
func (r Ref) Key() string { return r.Group + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name }
