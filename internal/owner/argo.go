package owner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// ArgoApplicationKind is Argo CD's Application.
var ArgoApplicationKind = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

const (
	argoTrackingID = "argocd.argoproj.io/tracking-id"
	// ArgoInstallationID marks what an Argo CD installation with an
	// installationID (argocd-cm) applies, beside its tracking annotation:
	// several Argo CDs share a cluster, each owning only what carries its
	// own.
	ArgoInstallationID = "argocd.argoproj.io/installation-id"
	argoInstanceLabel  = "app.kubernetes.io/instance"
	argoSkipRendering  = "+argocd:skip-file-rendering"
)

// argoSource is an Application source (argoproj.io/v1alpha1), the parts
// that change what Argo CD renders.
type argoSource struct {
	RepoURL        string         `json:"repoURL"`
	Path           string         `json:"path,omitempty"`
	TargetRevision string         `json:"targetRevision,omitempty"`
	Chart          string         `json:"chart,omitempty"`
	Ref            string         `json:"ref,omitempty"`
	Helm           *argoHelm      `json:"helm,omitempty"`
	Kustomize      *argoKustomize `json:"kustomize,omitempty"`
	Directory      *argoDirectory `json:"directory,omitempty"`
}

type argoHelm struct {
	ValueFiles              []string              `json:"valueFiles,omitempty"`
	Parameters              []argoHelmParam       `json:"parameters,omitempty"`
	FileParameters          []json.RawMessage     `json:"fileParameters,omitempty"`
	ReleaseName             string                `json:"releaseName,omitempty"`
	Values                  string                `json:"values,omitempty"`
	ValuesObject            *runtime.RawExtension `json:"valuesObject,omitempty"`
	IgnoreMissingValueFiles bool                  `json:"ignoreMissingValueFiles,omitempty"`
	SkipCrds                bool                  `json:"skipCrds,omitempty"`
	Namespace               string                `json:"namespace,omitempty"`
	KubeVersion             string                `json:"kubeVersion,omitempty"`
	APIVersions             []string              `json:"apiVersions,omitempty"`
}

type argoHelmParam struct {
	Name        string `json:"name,omitempty"`
	Value       string `json:"value,omitempty"`
	ForceString bool   `json:"forceString,omitempty"`
}

type argoKustomize struct {
	NamePrefix                string            `json:"namePrefix,omitempty"`
	NameSuffix                string            `json:"nameSuffix,omitempty"`
	Images                    []string          `json:"images,omitempty"`
	CommonLabels              map[string]string `json:"commonLabels,omitempty"`
	CommonAnnotations         map[string]string `json:"commonAnnotations,omitempty"`
	CommonAnnotationsEnvsubst bool              `json:"commonAnnotationsEnvsubst,omitempty"`
	ForceCommonLabels         bool              `json:"forceCommonLabels,omitempty"`
	ForceCommonAnnotations    bool              `json:"forceCommonAnnotations,omitempty"`
	LabelWithoutSelector      bool              `json:"labelWithoutSelector,omitempty"`
	LabelIncludeTemplates     bool              `json:"labelIncludeTemplates,omitempty"`
	Namespace                 string            `json:"namespace,omitempty"`
	Replicas                  []argoReplica     `json:"replicas,omitempty"`
	Patches                   []argoPatch       `json:"patches,omitempty"`
	Components                []string          `json:"components,omitempty"`
	IgnoreMissingComponents   bool              `json:"ignoreMissingComponents,omitempty"`
}

type argoReplica struct {
	Name  string             `json:"name"`
	Count intstr.IntOrString `json:"count"`
}

type argoPatch struct {
	Path    string          `json:"path,omitempty"`
	Patch   string          `json:"patch,omitempty"`
	Target  *fluxSelector   `json:"target,omitempty"`
	Options map[string]bool `json:"options,omitempty"`
}

type argoDirectory struct {
	Recurse bool   `json:"recurse,omitempty"`
	Include string `json:"include,omitempty"`
	Exclude string `json:"exclude,omitempty"`
}

// Argo is an Argo CD Application, ready to render the folder of one of
// its sources as Argo CD's repo-server does.
type Argo struct {
	Ref      cluster.Ref
	source   argoSource
	kind     string // the folder's: render.Kustomize, render.Helm or render.Plain
	instance string // the name its tracking uses: NAME, or NAMESPACE_NAME
	destNS   string
	tracking string // annotation (Argo CD 3's default), label, annotation+label
	// installation is argocd-cm's installationID: Argo CD marks what it
	// tracks by annotation with it.
	installation string
	env          map[string]string
	// toRoot is the path from the folder to its repository's root, for
	// $ref/... values files of the same repository.
	toRoot string
	refs   map[string]string // "$values" → repository URL
	// helmFiles and helmValues are a chart's values files (relative to
	// the folder) and inline values (parameters applied).
	helmFiles  []string
	helmValues *apiextensionsv1.JSON
	// single says the Application has this one source: the resources it
	// reports are the folder's alone.
	single bool

	last Report
}

// argoOf reads an Application for its source i (-1: spec.source) whose
// folder is dir (the relative path rel in its repository).
func argoOf(ctx context.Context, c *cluster.Client, u *unstructured.Unstructured, i int, dir, rel, commit string) (*Argo, error) {
	var spec struct {
		Source      *argoSource  `json:"source,omitempty"`
		Sources     []argoSource `json:"sources,omitempty"`
		Project     string       `json:"project,omitempty"`
		Destination struct {
			Namespace string `json:"namespace,omitempty"`
		} `json:"destination"`
	}
	m, _, _ := unstructured.NestedMap(u.Object, "spec")
	data, _ := json.Marshal(m)
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("Application %s/%s: spec: %w", u.GetNamespace(), u.GetName(), err)
	}
	a := &Argo{Ref: cluster.RefOf(u), destNS: spec.Destination.Namespace, refs: map[string]string{}}
	if i < 0 {
		a.source, a.single = *spec.Source, true
	} else {
		a.source = spec.Sources[i]
		for _, s := range spec.Sources {
			if s.Ref != "" {
				a.refs["$"+s.Ref] = s.RepoURL
			}
		}
	}
	a.toRoot = "."
	if rel != "." {
		a.toRoot = strings.TrimSuffix(strings.Repeat("../", strings.Count(rel, "/")+1), "/")
	}
	switch {
	case fileExists(dir, "kustomization.yaml", "kustomization.yml", "Kustomization"):
		a.kind = render.Kustomize
	case fileExists(dir, "Chart.yaml"):
		a.kind = render.Helm
	default:
		a.kind = render.Plain
	}
	// Argo CD names an Application outside its own namespace
	// NAMESPACE_NAME; its own namespace is where its argocd-cm is.
	a.instance = u.GetName()
	settings, found, err := ArgoSettings(ctx, c.Kube(), u.GetNamespace())
	if err != nil {
		return nil, err
	}
	if !found && u.GetNamespace() != "argocd" {
		a.instance = u.GetNamespace() + "_" + u.GetName()
	}
	a.tracking = "annotation"
	if t := settings["application.resourceTrackingMethod"]; t != "" {
		a.tracking = t
	}
	a.installation = settings["installationID"]
	short := commit
	if len(short) > 7 {
		short = short[:7]
	}
	short8 := commit
	if len(short8) > 8 {
		short8 = short8[:8]
	}
	a.env = map[string]string{
		"ARGOCD_APP_NAME": u.GetName(), "ARGOCD_APP_NAMESPACE": a.destNS, "ARGOCD_APP_PROJECT_NAME": spec.Project,
		"ARGOCD_APP_REVISION": commit, "ARGOCD_APP_REVISION_SHORT": short, "ARGOCD_APP_REVISION_SHORT_8": short8,
		"ARGOCD_APP_SOURCE_PATH": a.source.Path, "ARGOCD_APP_SOURCE_REPO_URL": a.source.RepoURL,
		"ARGOCD_APP_SOURCE_TARGET_REVISION": a.source.TargetRevision,
	}
	if a.kind == render.Helm {
		if a.helmFiles, a.helmValues, err = a.resolveHelmValues(dir); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func fileExists(dir string, names ...string) bool {
	for _, n := range names {
		if info, err := os.Stat(filepath.Join(dir, n)); err == nil && !info.IsDir() {
			return true
		}
	}
	return false
}

// Name names the Application: "Application argocd/shop".
func (a *Argo) Name() string { return fmt.Sprintf("Application %s/%s", a.Ref.Namespace, a.Ref.Name) }

// TargetNamespace is the Application's destination namespace.
func (a *Argo) TargetNamespace() string { return a.destNS }

// Last is the report of the last render.
func (a *Argo) Last() Report { return a.last }

// envsubst expands $VAR and ${VAR} with Argo CD's build environment, as
// Argo CD does in images, labels and annotations ($$ is a $).
func (a *Argo) envsubst(s string) string {
	return os.Expand(s, func(v string) string {
		if v == "$" {
			return "$"
		}
		return a.env[v]
	})
}

// Options sets a render's options to render as Argo CD's repo-server
// does for the Application's source.
func (a *Argo) Options(o render.Options) render.Options {
	o.PostBuild = a.postBuild
	switch a.kind {
	case render.Kustomize:
		if a.source.Kustomize != nil {
			o.Kustomization = a.kustomization
		}
	case render.Helm:
		h := &v1alpha1.HelmRender{ReleaseName: a.Ref.Name, Namespace: a.destNS, IncludeCRDs: true}
		if s := a.source.Helm; s != nil {
			if s.ReleaseName != "" {
				h.ReleaseName = s.ReleaseName
			}
			if s.Namespace != "" {
				h.Namespace = s.Namespace
			}
			h.IncludeCRDs = !s.SkipCrds
			h.KubeVersion, h.APIVersions = s.KubeVersion, s.APIVersions
		}
		h.ValuesFiles, h.Values = a.helmFiles, a.helmValues
		r := v1alpha1.Render{}
		if o.Render != nil {
			r = *o.Render
		}
		r.Helm = h
		o.Render = &r
		o.IncludeCRDs = h.IncludeCRDs
		o.Kustomization = nil
	case render.Plain:
		d := &render.Directory{}
		if s := a.source.Directory; s != nil {
			d.Recurse = s.Recurse
			include, exclude := s.Include, s.Exclude
			d.Match = func(rel string) bool {
				if exclude != "" && globMatch(exclude, rel) {
					return false
				}
				return include == "" || globMatch(include, rel)
			}
		}
		o.Directory = d
	}
	return o
}

// helmValues resolves the Application's Helm values against the tree the
// render reads: an error names what does not resolve.
func (a *Argo) resolveHelmValues(dir string) ([]string, *apiextensionsv1.JSON, error) {
	s := a.source.Helm
	if s == nil {
		return nil, nil, nil
	}
	var files []string
	for i, f := range s.ValueFiles {
		if ref, _, _ := strings.Cut(f, "/"); a.refs[ref] == "" {
			f = a.envsubst(f) // a $ref/ prefix is not a variable
		}
		if ref, rest, ok := strings.Cut(f, "/"); ok && strings.HasPrefix(ref, "$") {
			url, known := a.refs[ref]
			if !known {
				return nil, nil, fmt.Errorf("%s: spec.sources: helm.valueFiles[%d] %s: no source has ref %s", a.Name(), i, f, strings.TrimPrefix(ref, "$"))
			}
			if repoKey(url) != repoKey(a.source.RepoURL) {
				return nil, nil, fmt.Errorf("%s: helm.valueFiles[%d] %s: the values are in another repository (%s), which a render of this tree cannot read", a.Name(), i, f, url)
			}
			f = path.Join(a.toRoot, rest)
		}
		if s.IgnoreMissingValueFiles {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); errors.Is(err, fs.ErrNotExist) {
				continue
			}
		}
		files = append(files, f)
	}
	vals := map[string]any{}
	if s.Values != "" {
		if err := sigsyaml.Unmarshal([]byte(s.Values), &vals); err != nil {
			return nil, nil, fmt.Errorf("%s: helm.values: %w", a.Name(), err)
		}
	}
	if s.ValuesObject != nil && len(s.ValuesObject.Raw) > 0 {
		vals = map[string]any{} // valuesObject wins over values
		if err := json.Unmarshal(s.ValuesObject.Raw, &vals); err != nil {
			return nil, nil, fmt.Errorf("%s: helm.valuesObject: %w", a.Name(), err)
		}
	}
	for i, p := range s.Parameters {
		set := strvals.ParseInto
		if p.ForceString {
			set = strvals.ParseIntoString
		}
		if err := set(p.Name+"="+p.Value, vals); err != nil {
			return nil, nil, fmt.Errorf("%s: helm.parameters[%d] %s: %w", a.Name(), i, p.Name, err)
		}
	}
	if len(s.FileParameters) > 0 {
		return nil, nil, fmt.Errorf("%s: helm.fileParameters are not read by Sluice: pass the values with --values", a.Name())
	}
	if len(vals) == 0 {
		return files, nil, nil
	}
	raw, err := json.Marshal(vals)
	if err != nil {
		return nil, nil, err
	}
	return files, &apiextensionsv1.JSON{Raw: raw}, nil
}

// kustomization applies the Application's kustomize options to the
// folder's kustomization as Argo CD's `kustomize edit` commands do, in
// their order: name prefix and suffix, images, replicas, labels,
// annotations, namespace, patches, components.
func (a *Argo) kustomization(fsys source.FS, dir string, own []byte) ([]byte, error) {
	k := kusttypes.Kustomization{}
	if err := sigsyaml.Unmarshal(own, &k); err != nil {
		return nil, fmt.Errorf("%s: kustomization file: %w", dir, err)
	}
	k.FixKustomization()
	s := a.source.Kustomize
	where := a.Name() + ": spec.source.kustomize"
	if s.NamePrefix != "" {
		k.NamePrefix = s.NamePrefix
	}
	if s.NameSuffix != "" {
		k.NameSuffix = s.NameSuffix
	}
	if len(s.Images) > 0 {
		images := map[string]kusttypes.Image{}
		for _, im := range k.Images {
			images[im.Name] = im
		}
		for i, arg := range s.Images {
			im, err := parseImageArg(a.envsubst(arg))
			if err != nil {
				return nil, fmt.Errorf("%s.images[%d] %q: %w", where, i, arg, err)
			}
			images[im.Name] = im
		}
		k.Images = nil
		for _, name := range slices.Sorted(maps.Keys(images)) {
			k.Images = append(k.Images, images[name])
		}
	}
	for i, r := range s.Replicas {
		if r.Count.Type == intstr.String {
			return nil, fmt.Errorf("%s.replicas[%d].count %q: must be a number", where, i, r.Count.StrVal)
		}
		j := slices.IndexFunc(k.Replicas, func(x kusttypes.Replica) bool { return x.Name == r.Name })
		if j < 0 {
			k.Replicas = append(k.Replicas, kusttypes.Replica{Name: r.Name, Count: int64(r.Count.IntVal)})
		} else {
			k.Replicas[j].Count = int64(r.Count.IntVal)
		}
	}
	if len(s.CommonLabels) > 0 {
		labels := map[string]string{}
		for kk, v := range s.CommonLabels {
			labels[kk] = a.envsubst(v)
		}
		if err := addLabels(&k, labels, s); err != nil {
			return nil, fmt.Errorf("%s.commonLabels: %w", where, err)
		}
	}
	if len(s.CommonAnnotations) > 0 {
		if k.CommonAnnotations == nil {
			k.CommonAnnotations = map[string]string{}
		}
		for _, kk := range slices.Sorted(maps.Keys(s.CommonAnnotations)) {
			v := s.CommonAnnotations[kk]
			if s.CommonAnnotationsEnvsubst {
				v = a.envsubst(v)
			}
			if _, ok := k.CommonAnnotations[kk]; ok && !s.ForceCommonAnnotations {
				return nil, fmt.Errorf("%s.commonAnnotations: annotation %s already in kustomization file (forceCommonAnnotations overrides it)", where, kk)
			}
			k.CommonAnnotations[kk] = v
		}
	}
	if s.Namespace != "" {
		k.Namespace = s.Namespace
	}
	for _, p := range s.Patches {
		kp := kusttypes.Patch{Path: p.Path, Patch: p.Patch, Target: p.Target.selector()}
		if len(p.Options) > 0 {
			kp.Options = &kusttypes.PatchArgs{AllowNameChange: p.Options["allowNameChange"], AllowKindChange: p.Options["allowKindChange"]}
		}
		k.Patches = append(k.Patches, kp)
	}
	for i, c := range s.Components {
		if _, err := fsys.Stat(path.Join(dir, c)); errors.Is(err, fs.ErrNotExist) {
			if s.IgnoreMissingComponents {
				continue
			}
			return nil, fmt.Errorf("%s.components[%d]: %s does not exist", where, i, c)
		}
		if !slices.Contains(k.Components, c) {
			k.Components = append(k.Components, c)
		}
	}
	return sigsyaml.Marshal(k)
}

// addLabels adds labels as `kustomize edit add label` does: to
// commonLabels (selectors too), or, without selectors, to a labels
// entry; an existing key is an error unless forced.
func addLabels(k *kusttypes.Kustomization, labels map[string]string, s *argoKustomize) error {
	keys := slices.Sorted(maps.Keys(labels))
	if !s.LabelWithoutSelector {
		if k.CommonLabels == nil {
			k.CommonLabels = map[string]string{}
		}
		for _, kk := range keys {
			if _, ok := k.CommonLabels[kk]; ok && !s.ForceCommonLabels {
				return fmt.Errorf("label %s already in kustomization file (forceCommonLabels overrides it)", kk)
			}
			k.CommonLabels[kk] = labels[kk]
		}
		return nil
	}
	entry := -1
	for i, l := range k.Labels {
		if !l.IncludeSelectors && l.IncludeTemplates == s.LabelIncludeTemplates && l.FieldSpecs == nil {
			entry = i
			break
		}
	}
	if entry < 0 {
		k.Labels = append(k.Labels, kusttypes.Label{Pairs: map[string]string{}, IncludeTemplates: s.LabelIncludeTemplates})
		entry = len(k.Labels) - 1
	}
	for _, kk := range keys {
		if _, ok := k.Labels[entry].Pairs[kk]; ok && !s.ForceCommonLabels {
			return fmt.Errorf("label %s already in kustomization file (forceCommonLabels overrides it)", kk)
		}
		k.Labels[entry].Pairs[kk] = labels[kk]
	}
	return nil
}

// parseImageArg reads an image as `kustomize edit set image` takes it:
// [NAME=]NEWNAME[:TAG][@DIGEST], or NAME:TAG, NAME@DIGEST.
func parseImageArg(arg string) (kusttypes.Image, error) {
	key, value, hasKey := strings.Cut(arg, "=")
	if !hasKey {
		key, value = "", arg
	}
	name, tag, digest := splitImage(value)
	if name == arg {
		return kusttypes.Image{}, errors.New("give NAME=NEWNAME, NAME:TAG or NAME@DIGEST")
	}
	im := kusttypes.Image{NewTag: tag, Digest: digest}
	if key == "" {
		im.Name = name
	} else {
		im.Name, im.NewName = key, name
	}
	return im, nil
}

// splitImage splits an image into name, tag and digest.
func splitImage(s string) (name, tag, digest string) {
	if i := strings.Index(s, "@"); i >= 0 {
		s, digest = s[:i], s[i+1:]
	}
	if i := strings.LastIndex(s, ":"); i >= 0 && !strings.Contains(s[i+1:], "/") {
		s, tag = s[:i], s[i+1:]
	}
	return s, tag, digest
}

// postBuild sets Argo CD's resource tracking on every object but CRDs,
// with its installation ID when argocd-cm has one, as the repo-server
// does.
func (a *Argo) postBuild(_ context.Context, objects []*yaml.RNode, _ []string) ([]*yaml.RNode, error) {
	rep := Report{Settings: a.settings()}
	for _, o := range objects {
		if o.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(o.GetApiVersion(), "apiextensions.k8s.io/") {
			continue
		}
		if a.tracking == "annotation" || a.tracking == "annotation+label" || a.tracking == "" {
			ns := o.GetNamespace()
			if ns == "" {
				ns = a.destNS
			}
			group, _, _ := strings.Cut(o.GetApiVersion(), "/")
			if !strings.Contains(o.GetApiVersion(), "/") {
				group = ""
			}
			id := fmt.Sprintf("%s:%s/%s:%s/%s", a.instance, group, o.GetKind(), ns, o.GetName())
			if err := o.PipeE(yaml.SetAnnotation(argoTrackingID, id)); err != nil {
				return nil, err
			}
			if a.installation != "" {
				if err := o.PipeE(yaml.SetAnnotation(ArgoInstallationID, a.installation)); err != nil {
					return nil, err
				}
			} else if err := o.PipeE(yaml.ClearAnnotation(ArgoInstallationID)); err != nil {
				return nil, err
			}
		}
		if a.tracking == "label" || a.tracking == "annotation+label" {
			v := a.instance
			if len(v) > 63 {
				v = strings.TrimRight(v[:63], "-_.")
			}
			if err := o.PipeE(yaml.SetLabel(argoInstanceLabel, v)); err != nil {
				return nil, err
			}
		}
	}
	a.last = rep
	return objects, nil
}

// settings lists the Application's source options that apply.
func (a *Argo) settings() []string {
	var out []string
	add := func(cond bool, s string) {
		if cond {
			out = append(out, s)
		}
	}
	switch a.kind {
	case render.Kustomize:
		if k := a.source.Kustomize; k != nil {
			add(k.NamePrefix != "", "namePrefix "+k.NamePrefix)
			add(k.NameSuffix != "", "nameSuffix "+k.NameSuffix)
			add(k.Namespace != "", "namespace "+k.Namespace)
			add(len(k.Images) > 0, fmt.Sprintf("%d image%s", len(k.Images), plural(len(k.Images))))
			add(len(k.Replicas) > 0, fmt.Sprintf("%d replica count%s", len(k.Replicas), plural(len(k.Replicas))))
			add(len(k.CommonLabels) > 0, "commonLabels")
			add(len(k.CommonAnnotations) > 0, "commonAnnotations")
			add(len(k.Patches) == 1, "1 patch")
			add(len(k.Patches) > 1, fmt.Sprintf("%d patches", len(k.Patches)))
			add(len(k.Components) > 0, fmt.Sprintf("%d component%s", len(k.Components), plural(len(k.Components))))
		}
	case render.Helm:
		name := a.Ref.Name
		if h := a.source.Helm; h != nil {
			if h.ReleaseName != "" {
				name = h.ReleaseName
			}
			add(len(h.ValueFiles) > 0, fmt.Sprintf("%d values file%s", len(h.ValueFiles), plural(len(h.ValueFiles))))
			add(h.Values != "" || h.ValuesObject != nil, "values")
			add(len(h.Parameters) > 0, fmt.Sprintf("%d parameter%s", len(h.Parameters), plural(len(h.Parameters))))
		}
		out = append([]string{"release " + name}, out...)
	case render.Plain:
		if d := a.source.Directory; d != nil {
			add(d.Recurse, "recurse")
			add(d.Include != "", "include "+d.Include)
			add(d.Exclude != "", "exclude "+d.Exclude)
		}
	}
	out = append(out, a.tracking+" tracking")
	return out
}

// globMatch matches a path against a glob as Argo CD's directory include
// and exclude do: * and ? cross folders, {a,b} is either.
func globMatch(pattern, name string) bool {
	if i := strings.Index(pattern, "{"); i >= 0 {
		if j := strings.Index(pattern[i:], "}"); j > 0 {
			for _, alt := range strings.Split(pattern[i+1:i+j], ",") {
				if globMatch(pattern[:i]+alt+pattern[i+j+1:], name) {
					return true
				}
			}
			return false
		}
	}
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for k := len(name); k >= 0; k-- {
				if globMatch(pattern[1:], name[k:]) {
					return true
				}
			}
			return false
		case '?':
			if name == "" {
				return false
			}
			pattern, name = pattern[1:], name[1:]
		default:
			if name == "" || pattern[0] != name[0] {
				return false
			}
			pattern, name = pattern[1:], name[1:]
		}
	}
	return name == ""
}

// ArgoSettings reads argocd-cm, the settings of the Argo CD installation in
// namespace; found is false where there is none (the namespace of an
// Application outside its installation's).
func ArgoSettings(ctx context.Context, kube client.Reader, namespace string) (settings map[string]string, found bool, err error) {
	var cm corev1.ConfigMap
	err = kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "argocd-cm"}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading argocd-cm in %s: %w", namespace, err)
	}
	return cm.Data, true, nil
}
