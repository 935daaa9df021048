package owner

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// Owner is a GitOps object that deploys a folder, ready to render it as
// its tool would.
type Owner interface {
	// Name names it to a person: "Kustomization flux-system/apps".
	Name() string
	// Options sets a render's options to render as the owner's tool does.
	Options(render.Options) render.Options
	// TargetNamespace is the namespace it puts objects in, if it sets one.
	TargetNamespace() string
	// Last reports what its settings did in the last render.
	Last() Report
}

var gitRepositoryKind = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}

// None is the --as-owner value that renders the folder as it is.
const None = "none"

// Resolve finds the owner a render of dir is made as. name is what the
// person gave: "none" for none, KIND/NAMESPACE/NAME or NAMESPACE/NAME
// (a Flux Kustomization) for that one, "" to find the one whose source
// and path are dir's repository and path (nil when none is). The tree
// is dir's git working tree, or, with repo set, a checkout of repo.
func Resolve(ctx context.Context, c *cluster.Client, dir, repo, name string) (Owner, error) {
	switch {
	case name == None:
		return nil, nil
	case name != "":
		kind, rest, found := strings.Cut(name, "/")
		if !found || !strings.Contains(rest, "/") {
			kind, rest = "Kustomization", name
		}
		ns, n, ok := strings.Cut(rest, "/")
		if !ok || ns == "" || n == "" || strings.Contains(n, "/") {
			return nil, fmt.Errorf("--as-owner %q: give [Kustomization/]NAMESPACE/NAME, or %s", name, None)
		}
		if strings.EqualFold(kind, "Application") || strings.EqualFold(kind, "applications.argoproj.io") {
			return ReadArgo(ctx, c, cluster.Ref{Namespace: ns, Name: n}, dir)
		}
		if !strings.EqualFold(kind, "Kustomization") && !strings.EqualFold(kind, "kustomizations.kustomize.toolkit.fluxcd.io") {
			return nil, fmt.Errorf("--as-owner %q: kind %s: give a Flux Kustomization or an Argo CD Application", name, kind)
		}
		f, err := ReadFlux(ctx, c, cluster.Ref{Namespace: ns, Name: n})
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	t, ok := placeOf(dir)
	if !ok {
		return nil, nil // not in git: no source can be matched
	}
	if repo == "" {
		repo = t.head.Remote
	}
	if repo == "" {
		return nil, nil
	}
	rel := t.rel
	f, err := FindFlux(ctx, c, repo, rel)
	if err != nil {
		return nil, err
	}
	a, err := FindArgo(ctx, c, repo, rel, t.abs, t.head.Commit)
	if err != nil {
		return nil, err
	}
	switch {
	case f != nil && a != nil:
		return nil, fmt.Errorf("both %s and %s apply %s: name one with --as-owner", f.Name(), a.Name(), rel)
	case f != nil:
		return f, nil
	case a != nil:
		return a, nil
	}
	return nil, nil // no typed nil in the interface
}

// ReadArgo reads the Argo CD Application ref names, for the folder dir of
// a working tree: the one of its sources whose path is dir's.
func ReadArgo(ctx context.Context, c *cluster.Client, ref cluster.Ref, dir string) (Owner, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ArgoApplicationKind)
	if err := c.Kube().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return nil, fmt.Errorf("reading Application %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	t, ok := placeOf(dir)
	if !ok {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		t = place{abs: abs, rel: "."}
	}
	rel, commit, abs := t.rel, t.head.Commit, t.abs
	sources := argoSources(u)
	i := slices.IndexFunc(sources, func(s argoSourceRef) bool { return s.path == rel })
	if i < 0 {
		i = slices.IndexFunc(sources, func(s argoSourceRef) bool { return s.path != "" })
	}
	if i < 0 {
		return nil, fmt.Errorf("Application %s/%s has no source with a path (a chart from a Helm repository is not rendered from a tree)", ref.Namespace, ref.Name)
	}
	return argoOf(ctx, c, u, sources[i].index, abs, rel, commit)
}

// argoSourceRef is an Application source's place and folder.
type argoSourceRef struct {
	index int // -1: spec.source
	repo  string
	path  string
}

func argoSources(u *unstructured.Unstructured) []argoSourceRef {
	var out []argoSourceRef
	clean := func(p string) string {
		if p == "" {
			return ""
		}
		return path.Clean(strings.TrimPrefix(p, "/"))
	}
	if m, ok, _ := unstructured.NestedMap(u.Object, "spec", "source"); ok {
		repo, _ := m["repoURL"].(string)
		p, _ := m["path"].(string)
		out = append(out, argoSourceRef{index: -1, repo: repo, path: clean(p)})
	}
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
	for i, s := range list {
		m, _ := s.(map[string]any)
		repo, _ := m["repoURL"].(string)
		p, _ := m["path"].(string)
		out = append(out, argoSourceRef{index: i, repo: repo, path: clean(p)})
	}
	return out
}

// FindArgo finds the Argo CD Application with a source of repoURL whose
// path is rel (dir on this machine, at commit). It returns nil when none
// has; an error naming them when several have.
func FindArgo(ctx context.Context, c *cluster.Client, repoURL, rel, dir, commit string) (*Argo, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(ArgoApplicationKind.GroupVersion().WithKind("ApplicationList"))
	if err := c.Kube().List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing Argo CD Applications: %w", err)
	}
	want := repoKey(repoURL)
	rel = path.Clean(rel)
	type match struct {
		u     *unstructured.Unstructured
		index int
	}
	var found []match
	for i := range l.Items {
		for _, s := range argoSources(&l.Items[i]) {
			if s.path == rel && repoKey(s.repo) == want {
				found = append(found, match{&l.Items[i], s.index})
				break
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return argoOf(ctx, c, found[0].u, found[0].index, dir, rel, commit)
	}
	var names []string
	for _, m := range found {
		names = append(names, m.u.GetNamespace()+"/"+m.u.GetName())
	}
	return nil, fmt.Errorf("several Argo CD Applications apply %s of %s (%s): name one with --as-owner Application/NAMESPACE/NAME", rel, source.Redact(repoURL), strings.Join(names, ", "))
}

// FindFlux finds the Flux Kustomization that applies the folder rel of
// the repository at repoURL: its spec.path is rel and its source is a
// GitRepository of that URL (compared without scheme, user, ".git" and
// trailing slash, the host without case). It returns nil when none
// does; an error naming them when several do.
func FindFlux(ctx context.Context, c *cluster.Client, repoURL, rel string) (*Flux, error) {
	candidates, err := fluxAt(ctx, c, rel)
	if err != nil {
		return nil, err
	}
	want := repoKey(repoURL)
	urls := map[string]string{}
	var found []*Flux
	for _, f := range candidates {
		src := f.spec.SourceRef
		if src.Kind != "GitRepository" {
			continue
		}
		key := src.Namespace + "/" + src.Name
		u, ok := urls[key]
		if !ok {
			g := &unstructured.Unstructured{}
			g.SetGroupVersionKind(gitRepositoryKind)
			if err := c.Kube().Get(ctx, client.ObjectKey{Namespace: src.Namespace, Name: src.Name}, g); err == nil {
				u, _, _ = unstructured.NestedString(g.Object, "spec", "url")
			}
			urls[key] = u
		}
		if u != "" && repoKey(u) == want {
			found = append(found, f)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	var names []string
	for _, f := range found {
		names = append(names, f.Ref.Namespace+"/"+f.Ref.Name)
	}
	return nil, fmt.Errorf("several Flux Kustomizations apply %s of %s (%s): name one with --as-owner NAMESPACE/NAME", rel, source.Redact(repoURL), strings.Join(names, ", "))
}

// fluxAt lists the Flux Kustomizations whose spec.path is rel (none
// where the cluster has no Flux, or the person may not list them).
func fluxAt(ctx context.Context, c *cluster.Client, rel string) ([]*Flux, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(FluxKustomizationKind.GroupVersion().WithKind("KustomizationList"))
	if err := c.Kube().List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing Flux Kustomizations: %w", err)
	}
	rel = path.Clean(rel)
	var out []*Flux
	for i := range l.Items {
		f, err := fluxOf(&l.Items[i], c.Kube())
		if err != nil {
			continue
		}
		if path.Clean(strings.TrimPrefix(f.spec.Path, "/")) == rel || rel == "." && f.spec.Path == "" {
			out = append(out, f)
		}
	}
	return out, nil
}

// place is a folder's place in its git working tree.
type place struct {
	head source.Head
	abs  string
	rel  string // slash-separated, from the tree's top
}

// placeOf finds the git working tree holding dir; false outside git.
func placeOf(dir string) (place, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return place{}, false
	}
	head, err := source.LocalHead(abs)
	if err != nil {
		return place{}, false
	}
	rel, err := filepath.Rel(head.Root, abs)
	if err != nil {
		return place{}, false
	}
	return place{head: head, abs: abs, rel: filepath.ToSlash(rel)}, true
}

// repoKey is a repository URL reduced to what names the repository:
// "host/org/repo" from https://user@Host/org/repo.git,
// ssh://git@host/org/repo or git@host:org/repo.
func repoKey(u string) string {
	u = strings.TrimSpace(u)
	if !strings.Contains(u, "://") {
		if at := strings.Index(u, "@"); at >= 0 && strings.Contains(u[at:], ":") { // scp-like: git@host:org/repo
			host, p, _ := strings.Cut(u[at+1:], ":")
			u = "ssh://" + host + "/" + p
		} else {
			u = "file://" + u
		}
	}
	p, err := url.Parse(u)
	if err != nil {
		return strings.ToLower(u)
	}
	host := strings.ToLower(p.Hostname())
	if port := p.Port(); port != "" && !(p.Scheme == "https" && port == "443") && !(p.Scheme == "http" && port == "80") && !(p.Scheme == "ssh" && port == "22") {
		host += ":" + port
	}
	return host + "/" + strings.TrimSuffix(strings.Trim(p.Path, "/"), ".git")
}

// FromLabels finds the Flux Kustomization of a folder whose working
// tree's remote is not its source's URL (a fork, a mirror): one whose
// spec.path is the folder's, and whose owner labels (kustomize-controller
// sets them on what it applies) are on the live counterparts of the
// folder's objects (namespaced ones without a namespace looked up in
// namespace). objects renders the folder; it is called only when a
// Kustomization has the folder's path, rendering being the costly part.
// It returns nil when none is found.
func FromLabels(ctx context.Context, c *cluster.Client, dir, namespace string, objects func() ([]*unstructured.Unstructured, error)) (Owner, error) {
	t, ok := placeOf(dir)
	if !ok {
		return nil, nil
	}
	candidates, err := fluxAt(ctx, c, t.rel)
	if err != nil || len(candidates) == 0 {
		return nil, err
	}
	objs, err := objects()
	if err != nil {
		return nil, nil // the session's first iteration reports it
	}
	var ref *cluster.Ref
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
		if key.Namespace == "" {
			if namespaced, err := c.Kube().IsObjectNamespaced(o); err == nil && namespaced {
				key.Namespace = namespace
			}
		}
		if err := c.Kube().Get(ctx, key, live); err != nil {
			continue // not there, or not this person's to see
		}
		l := live.GetLabels()
		name, ns := l[labelFluxName], l[labelFluxNamespace]
		if name == "" || ns == "" {
			continue
		}
		if ref != nil && (ref.Name != name || ref.Namespace != ns) {
			return nil, nil // several owners: none is the folder's
		}
		ref = &cluster.Ref{Namespace: ns, Name: name}
	}
	if ref == nil {
		return nil, nil
	}
	for _, f := range candidates {
		if f.Ref.Namespace == ref.Namespace && f.Ref.Name == ref.Name {
			return f, nil
		}
	}
	return nil, nil // it applies another folder, of which this may be a part
}

// Render renders dir as the owner name names (see Resolve; "auto" finds
// it, and it must be found) applies it, for a person to read: the values
// of the Secrets it decrypted are masked.
func Render(ctx context.Context, c *cluster.Client, dir, name string, o render.Options) (*render.Result, Owner, error) {
	find := name
	if name == "auto" {
		find = ""
	}
	own, err := Resolve(ctx, c, dir, "", find)
	if err != nil {
		return nil, nil, err
	}
	if own == nil {
		return nil, nil, fmt.Errorf("--as-owner %s: no Flux Kustomization or Argo CD Application of the cluster applies %s from this repository: name one", name, dir)
	}
	res, _, err := render.Local(ctx, dir, own.Options(o))
	if err != nil {
		return nil, nil, fmt.Errorf("rendering %s as %s: %w", dir, own.Name(), err)
	}
	nodes, err := res.Nodes()
	if err != nil {
		return nil, nil, err
	}
	MaskDecrypted(nodes, own.Last())
	return &render.Result{Renderer: res.Renderer, Objects: nodes, Inputs: res.Inputs}, own, nil
}
