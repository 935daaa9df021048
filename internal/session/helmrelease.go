package session

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/strvals"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/internal/cluster"
)

// HelmRelease is what a Flux HelmRelease gives the chart it deploys.
type HelmRelease struct {
	Ref         cluster.Ref
	ReleaseName string
	// Namespace is the release's namespace: spec.targetNamespace, or the
	// HelmRelease's own.
	Namespace string
	// Values are spec.values merged with spec.valuesFrom, in Flux's order.
	Values map[string]any
}

// FindHelmRelease finds the Flux HelmRelease that deploys a chart: one
// whose spec.chart.spec.chart (a chart name, or a path in a Git source)
// or spec.chartRef names chartName or dirName. With namespace set, only
// HelmReleases releasing into it count. It returns nil when none does; an
// error when several do.
func FindHelmRelease(ctx context.Context, c *cluster.Client, chartName, dirName, namespace string) (*cluster.Ref, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(fluxHelmRelease.GroupVersion().WithKind("HelmReleaseList"))
	if err := c.Kube().List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil // no Flux here
		}
		return nil, fmt.Errorf("listing HelmReleases: %w", err)
	}
	var found []cluster.Ref
	for i := range l.Items {
		hr := &l.Items[i]
		chart, _, _ := unstructured.NestedString(hr.Object, "spec", "chart", "spec", "chart")
		ref, _, _ := unstructured.NestedString(hr.Object, "spec", "chartRef", "name")
		name := path.Base(strings.TrimSuffix(chart, "/"))
		if !(chart != "" && (name == chartName || name == dirName) || ref != "" && (ref == chartName || ref == dirName)) {
			continue
		}
		if namespace != "" && releaseNamespace(hr) != namespace {
			continue
		}
		found = append(found, cluster.RefOf(hr))
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	var names []string
	for _, r := range found {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	return nil, fmt.Errorf("several HelmReleases deploy chart %s (%s): name one with --helm-release NAMESPACE/NAME, or pass --values", chartName, strings.Join(names, ", "))
}

func releaseNamespace(hr *unstructured.Unstructured) string {
	if ns, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace"); ns != "" {
		return ns
	}
	return hr.GetNamespace()
}

// ReadHelmRelease reads a HelmRelease's release name, namespace and
// values as helm-controller computes them: the spec.valuesFrom
// ConfigMaps and Secrets merged in order, spec.values over them, and
// references with a targetPath set last, over everything.
func ReadHelmRelease(ctx context.Context, c *cluster.Client, ref cluster.Ref) (*HelmRelease, error) {
	ref.Group, ref.Version, ref.Kind = fluxHelmRelease.Group, fluxHelmRelease.Version, fluxHelmRelease.Kind
	hr, err := getRef(ctx, c.Kube(), ref)
	if err != nil {
		return nil, fmt.Errorf("reading HelmRelease %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := &HelmRelease{Ref: cluster.RefOf(hr), Namespace: releaseNamespace(hr), Values: map[string]any{}}
	out.ReleaseName, _, _ = unstructured.NestedString(hr.Object, "spec", "releaseName")
	if out.ReleaseName == "" {
		out.ReleaseName = hr.GetName()
		if tn, _, _ := unstructured.NestedString(hr.Object, "spec", "targetNamespace"); tn != "" {
			out.ReleaseName = tn + "-" + hr.GetName()
		}
		out.ReleaseName = shortenReleaseName(out.ReleaseName)
	}
	refs, _, _ := unstructured.NestedSlice(hr.Object, "spec", "valuesFrom")
	type targeted struct {
		path, value string
		literal     bool
	}
	var later []targeted
	for i, r := range refs {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		key, _ := m["valuesKey"].(string)
		target, _ := m["targetPath"].(string)
		optional, _ := m["optional"].(bool)
		literal, _ := m["literal"].(bool)
		if key == "" {
			key = "values.yaml"
		}
		where := fmt.Sprintf("HelmRelease %s/%s spec.valuesFrom[%d] (%s %s)", hr.GetNamespace(), hr.GetName(), i, kind, name)
		data, err := referencedData(ctx, c.Kube(), kind, hr.GetNamespace(), name)
		if apierrors.IsNotFound(err) && optional {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		raw, ok := data[key]
		if !ok {
			return nil, fmt.Errorf("%s: no key %q", where, key)
		}
		if target != "" {
			later = append(later, targeted{target, string(raw), literal})
			continue
		}
		var v map[string]any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: key %s: %w", where, key, err)
		}
		mergeValues(out.Values, v)
	}
	if inline, ok, _ := unstructured.NestedMap(hr.Object, "spec", "values"); ok {
		mergeValues(out.Values, inline)
	}
	for _, t := range later {
		var err error
		if t.literal {
			err = strvals.ParseLiteralInto(t.path+"="+t.value, out.Values)
		} else {
			err = strvals.ParseInto(t.path+"="+t.value, out.Values)
		}
		if err != nil {
			return nil, fmt.Errorf("HelmRelease %s/%s: targetPath %s: %w", hr.GetNamespace(), hr.GetName(), t.path, err)
		}
	}
	return out, nil
}

func referencedData(ctx context.Context, c client.Client, kind, ns, name string) (map[string][]byte, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	switch kind {
	case "ConfigMap":
		var cm corev1.ConfigMap
		if err := c.Get(ctx, key, &cm); err != nil {
			return nil, err
		}
		out := map[string][]byte{}
		for k, v := range cm.Data {
			out[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			out[k] = v
		}
		return out, nil
	case "Secret":
		var s corev1.Secret
		if err := c.Get(ctx, key, &s); err != nil {
			return nil, err
		}
		return s.Data, nil
	}
	return nil, fmt.Errorf("kind must be ConfigMap or Secret")
}

// mergeValues merges src into dst as Helm merges values: maps key by key,
// recursively; anything else replaced.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// shortenReleaseName shortens a release name over Helm's 53 characters as
// helm-controller does: the first 40 characters, a dash, and the first 12
// hex digits of the name's SHA-256.
func shortenReleaseName(name string) string {
	if len(name) <= 53 {
		return name
	}
	return fmt.Sprintf("%s-%x", name[:40], sha256.Sum256([]byte(name)))[:53]
}

// metadata puts on every rendered object what helm-controller applies
// with it: Helm's ownership annotations and managed-by label, and the
// labels Flux's post-renderer adds naming the HelmRelease. A chart
// rendered as the HelmRelease then compares with what it applied, field
// for field (helm-controller applies server-side).
func (h *HelmRelease) metadata(_ context.Context, objs []*kyaml.RNode, _ []string) ([]*kyaml.RNode, error) {
	for _, o := range objs {
		for _, f := range []kyaml.Filter{
			kyaml.SetAnnotation("meta.helm.sh/release-name", h.ReleaseName),
			kyaml.SetAnnotation("meta.helm.sh/release-namespace", h.Namespace),
			kyaml.SetLabel("app.kubernetes.io/managed-by", "Helm"),
			kyaml.SetLabel("helm.toolkit.fluxcd.io/name", h.Ref.Name),
			kyaml.SetLabel("helm.toolkit.fluxcd.io/namespace", h.Ref.Namespace),
		} {
			if err := o.PipeE(f); err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
		}
	}
	return objs, nil
}
