package session

import (
	"context"
	"errors"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
)

// handOver ends a session by keeping what it applied: the objects lose the
// session's mark and stay, for GitOps to adopt.
func handOver(ctx context.Context, c *cluster.Client, rec *Record) (*Restoration, error) {
	r := &Restoration{Session: rec.Name}
	var errs []error
	for _, ref := range rec.Applied {
		live, err := getRef(ctx, c.Kube(), ref)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if live.GetAnnotations()[annotationSession] != rec.Name {
			continue
		}
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotationSession: nil}}}
		if err := mergePatch(ctx, c.Kube(), live, patch, "handing over"); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Kept = append(r.Kept, ref)
	}
	return r, errors.Join(errs...)
}

// Handoff says where Flux should find what a session ran.
type Handoff struct {
	// Name names the GitRepository and the Kustomization.
	Name string
	// Namespace is where they go; the default is flux-system.
	Namespace string
	// URL and Branch are the repository and branch of the working tree.
	URL    string
	Branch string
	// Path is the rendered directory, relative to the repository's root.
	Path string
	// TargetNamespace is the namespace namespaced objects without one go
	// to, as in the session.
	TargetNamespace string
}

// Manifests returns the Flux GitRepository and Kustomization that adopt
// what a handed-over session left on the cluster, as YAML to commit.
func (h Handoff) Manifests() ([]byte, error) {
	if h.URL == "" {
		return nil, errors.New("the working tree has no remote (git remote add origin URL) for Flux to fetch from")
	}
	if h.Branch == "" {
		return nil, errors.New("the working tree is not on a branch for Flux to follow")
	}
	if h.Namespace == "" {
		h.Namespace = "flux-system"
	}
	p := "./" + strings.TrimPrefix(path.Clean("/"+h.Path), "/")
	repo := map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1",
		"kind":       "GitRepository",
		"metadata":   map[string]any{"name": h.Name, "namespace": h.Namespace},
		"spec": map[string]any{
			"interval": "1m",
			"url":      h.URL,
			"ref":      map[string]any{"branch": h.Branch},
		},
	}
	spec := map[string]any{
		"interval":  "10m",
		"path":      p,
		"prune":     true,
		"sourceRef": map[string]any{"kind": "GitRepository", "name": h.Name},
	}
	if h.TargetNamespace != "" {
		spec["targetNamespace"] = h.TargetNamespace
	}
	ks := map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
		"kind":       "Kustomization",
		"metadata":   map[string]any{"name": h.Name, "namespace": h.Namespace},
		"spec":       spec,
	}
	var out []byte
	for i, obj := range []map[string]any{repo, ks} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, data...)
	}
	return append([]byte("# Flux adopts what `sluice run` left on the cluster: commit this where\n# your cluster's Flux reads its configuration.\n"), out...), nil
}
