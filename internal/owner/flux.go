package owner

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/fluxcd/pkg/envsubst"
	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/provider"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/secrets"
	"sluice.dev/sluice/internal/source"
)

// FluxKustomizationKind is the Flux Kustomization's API.
var FluxKustomizationKind = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

// Labels and annotations kustomize-controller reads on the objects it
// builds, and the owner labels it sets on those it applies.
const (
	fluxGroup           = "kustomize.toolkit.fluxcd.io"
	labelFluxName       = fluxGroup + "/name"
	labelFluxNamespace  = fluxGroup + "/namespace"
	annotationSubst     = fluxGroup + "/substitute"
	annotationDecrypt   = fluxGroup + "/decrypt"
	disabled            = "disabled"
	substituteAlways    = "Always"
	decryptionSOPS      = "sops"
	maxVariables        = 10000
	maxVariablesBytes   = 4 << 20
	sourceInlineVarName = "spec.postBuild.substitute"
)

// fluxSpec is the part of a Kustomization's spec (kustomize.toolkit.fluxcd.io/v1)
// that changes what it applies.
type fluxSpec struct {
	Path                    string          `json:"path,omitempty"`
	SourceRef               fluxSourceRef   `json:"sourceRef"`
	TargetNamespace         string          `json:"targetNamespace,omitempty"`
	NamePrefix              string          `json:"namePrefix,omitempty"`
	NameSuffix              string          `json:"nameSuffix,omitempty"`
	Patches                 []fluxPatch     `json:"patches,omitempty"`
	Images                  []fluxImage     `json:"images,omitempty"`
	Components              []string        `json:"components,omitempty"`
	IgnoreMissingComponents bool            `json:"ignoreMissingComponents,omitempty"`
	BuildMetadata           []string        `json:"buildMetadata,omitempty"`
	CommonMetadata          *fluxMetadata   `json:"commonMetadata,omitempty"`
	PostBuild               *fluxPostBuild  `json:"postBuild,omitempty"`
	Decryption              *fluxDecryption `json:"decryption,omitempty"`
}

type fluxSourceRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type fluxPatch struct {
	Patch  string        `json:"patch"`
	Target *fluxSelector `json:"target,omitempty"`
}

type fluxSelector struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
}

// selector is the kustomize selector of a patch's target.
func (s *fluxSelector) selector() *kusttypes.Selector {
	if s == nil {
		return nil
	}
	out := &kusttypes.Selector{AnnotationSelector: s.AnnotationSelector, LabelSelector: s.LabelSelector}
	out.Group, out.Version, out.Kind, out.Name, out.Namespace = s.Group, s.Version, s.Kind, s.Name, s.Namespace
	return out
}

type fluxImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

type fluxMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type fluxPostBuild struct {
	SubstituteStrategy string               `json:"substituteStrategy,omitempty"`
	Substitute         map[string]string    `json:"substitute,omitempty"`
	SubstituteFrom     []fluxSubstituteFrom `json:"substituteFrom,omitempty"`
}

type fluxSubstituteFrom struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Optional bool   `json:"optional,omitempty"`
}

type fluxDecryption struct {
	Provider  string `json:"provider"`
	SecretRef *struct {
		Name string `json:"name"`
	} `json:"secretRef,omitempty"`
}

// Flux is a Flux Kustomization, ready to render a folder as
// kustomize-controller applies it.
type Flux struct {
	Ref  cluster.Ref
	spec fluxSpec
	// obj is the Kustomization as read, for fluxcd/pkg/kustomize.
	obj  *unstructured.Unstructured
	kube client.Client
	// ignore is the source's spec.ignore, read once.
	ignore string

	mu   sync.Mutex
	last Report
}

// Report says what the owner's settings did in the last render.
type Report struct {
	// Settings lists the owner's settings that apply: "targetNamespace
	// shop", "2 patches".
	Settings []string
	// Substituted counts, per source ("ConfigMap cluster-vars",
	// "spec.postBuild.substitute"), the variables the render used.
	Substituted map[string]int
	// Decrypted names the Secrets decrypted.
	Decrypted []string
}

// String is the report as a session's first iteration says it.
func (r Report) String() string {
	parts := slices.Clone(r.Settings)
	for _, src := range slices.Sorted(maps.Keys(r.Substituted)) {
		n := r.Substituted[src]
		parts = append(parts, fmt.Sprintf("%d substitution%s from %s", n, plural(n), src))
	}
	if n := len(r.Decrypted); n > 0 {
		parts = append(parts, fmt.Sprintf("%d Secret%s decrypted", n, plural(n)))
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ReadFlux reads the Flux Kustomization ref names, as the client's
// identity.
func ReadFlux(ctx context.Context, c *cluster.Client, ref cluster.Ref) (*Flux, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(FluxKustomizationKind)
	if err := c.Kube().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return nil, fmt.Errorf("reading Kustomization %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return fluxOf(u, c.Kube())
}

func fluxOf(u *unstructured.Unstructured, kube client.Client) (*Flux, error) {
	f := &Flux{Ref: cluster.RefOf(u), kube: kube, obj: u.DeepCopy()}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, &f.spec); err != nil {
		return nil, fmt.Errorf("Kustomization %s/%s: spec: %w", u.GetNamespace(), u.GetName(), err)
	}
	if f.spec.SourceRef.Namespace == "" {
		f.spec.SourceRef.Namespace = u.GetNamespace()
	}
	f.ignore = sourceIgnore(context.Background(), kube, f.spec.SourceRef)
	return f, nil
}

// Name is how the owner is named to a person: "Kustomization flux-system/apps".
func (f *Flux) Name() string {
	return fmt.Sprintf("Kustomization %s/%s", f.Ref.Namespace, f.Ref.Name)
}

// TargetNamespace is the namespace the Kustomization puts objects in, if
// it sets one.
func (f *Flux) TargetNamespace() string { return f.spec.TargetNamespace }

// Last is the report of the last render.
func (f *Flux) Last() Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Masked is what a printed render shows of a decrypted Secret's values.
const Masked = "**SOPS**"

// MaskDecrypted replaces, in objects an owner rendered, the values of
// the Secrets it decrypted (rep.Decrypted) with Masked, as `flux build`
// does: decrypted data is applied, never printed.
func MaskDecrypted(objects []*yaml.RNode, rep Report) {
	for _, o := range objects {
		id := strings.Trim(o.GetNamespace()+"/"+o.GetName(), "/")
		if !secrets.IsSecret(o) || !slices.Contains(rep.Decrypted, id) {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m := o.Field(field)
			if m == nil || m.Value.YNode().Kind != yaml.MappingNode {
				continue
			}
			c := m.Value.YNode().Content
			for i := 1; i < len(c); i += 2 {
				v := Masked
				if field == "data" {
					v = base64.StdEncoding.EncodeToString([]byte(Masked))
				}
				c[i].Value, c[i].Tag, c[i].Style = v, "!!str", 0
			}
		}
	}
}

// Options sets a render's options to build a folder as kustomize-controller
// would.
func (f *Flux) Options(o render.Options) render.Options {
	o.Kustomization = f.kustomization
	var dec *decryptor
	if d := f.spec.Decryption; d != nil && d.Provider == decryptionSOPS {
		dec = newDecryptor(f) // one render's: its Secret read when first needed
		o.Read = dec.read
	}
	o.PostBuild = func(ctx context.Context, objects []*yaml.RNode, origins []string) ([]*yaml.RNode, error) {
		return f.postBuild(ctx, dec, objects, origins)
	}
	return o
}

// settings lists the Kustomization's settings that change the build.
func (f *Flux) settings() []string {
	var out []string
	s := f.spec
	if s.TargetNamespace != "" {
		out = append(out, "targetNamespace "+s.TargetNamespace)
	}
	if s.NamePrefix != "" {
		out = append(out, "namePrefix "+s.NamePrefix)
	}
	if s.NameSuffix != "" {
		out = append(out, "nameSuffix "+s.NameSuffix)
	}
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			out = append(out, "1 "+one)
		case n > 1:
			out = append(out, fmt.Sprintf("%d %s", n, many))
		}
	}
	count(len(s.Patches), "patch", "patches")
	count(len(s.Images), "image", "images")
	count(len(s.Components), "component", "components")
	if m := s.CommonMetadata; m != nil && len(m.Labels)+len(m.Annotations) > 0 {
		out = append(out, "commonMetadata")
	}
	return out
}

// kustomization is the kustomization file kustomize-controller builds the
// folder with: the folder's own, or one listing its manifests, with the
// Kustomization's settings over it, made by kustomize-controller's own
// generator (fluxcd/pkg/kustomize, the version kustomize-controller
// v1.9.6 links). The generator reads a directory on disk (in
// kustomize-controller, the artifact source-controller made, without
// what .sourceignore leaves out): it is given a temporary one holding
// what it reads of dir, the tree itself is never written.
func (f *Flux) kustomization(fsys source.FS, dir string, own []byte) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "sluice-flux-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := f.artifact(fsys, dir, own, tmp); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	data, _, _, err := fluxkustomize.NewGenerator(tmp, *f.obj).GenerateManifest(filepath.Join(tmp, filepath.FromSlash(dir)))
	if err != nil {
		// Named as the tree names them, not as the copy does.
		return nil, fmt.Errorf("%s: %s", f.Name(), strings.ReplaceAll(err.Error(), tmp+string(filepath.Separator), ""))
	}
	return data, nil
}

// artifact writes into tmp what the generator reads of dir: its own
// kustomization file, or else every manifest under it (what
// source-controller leaves out of the artifact left out) and an empty
// kustomization file in each sub-folder that has one (listed, not
// descended into); and the folders the components name, where they are.
// What it reads is read through fsys, within its limits.
func (f *Flux) artifact(fsys source.FS, dir string, own []byte, tmp string) error {
	at := func(p string) string { return filepath.Join(tmp, filepath.FromSlash(p)) }
	write := func(p string, data []byte) error {
		if err := os.MkdirAll(filepath.Dir(at(p)), 0o700); err != nil {
			return err
		}
		return os.WriteFile(at(p), data, 0o600)
	}
	if err := os.MkdirAll(at(dir), 0o700); err != nil {
		return err
	}
	for i, c := range f.spec.Components {
		// The generator checks that a component is there (with
		// ignoreMissingComponents); what kustomize builds it from is the
		// tree's.
		p := path.Join(dir, c)
		if path.IsAbs(c) || strings.Contains(c, "://") || p == ".." || strings.HasPrefix(p, "../") {
			continue // refused by the generator, naming it
		}
		if _, err := fsys.Stat(p); err == nil {
			if err := os.MkdirAll(at(p), 0o700); err != nil {
				return fmt.Errorf("spec.components[%d]: %w", i, err)
			}
		}
	}
	if own != nil {
		return write(path.Join(dir, "kustomization.yaml"), own)
	}
	ignored, err := ignoreMatcher(fsys, f.ignore)
	if err != nil {
		return fmt.Errorf("reading .sourceignore files: %w", err)
	}
	return source.Walk(context.Background(), fsys, dir, source.WalkOptions{}, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if path.Base(p) == ".git" || ignored.Match(strings.Split(p, "/"), d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			for _, k := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
				if _, err := fsys.Stat(path.Join(p, k)); err == nil {
					if err := write(path.Join(p, k), nil); err != nil {
						return err
					}
					return fs.SkipDir
				}
			}
			return nil
		}
		if ext := path.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		// Parsed here first, bounded (the generator parses each file
		// again, unbounded): a file of no Kubernetes objects, or one
		// whose aliases explode, is refused naming file and document.
		if _, err := render.ParseObjects(p, data); err != nil {
			return err
		}
		return write(p, data)
	})
}

// postBuild does, object by object, what kustomize-controller does after
// the build: decryption, then variable substitution; then it sets the
// owner labels and the common metadata, as kustomize-controller does
// before applying.
func (f *Flux) postBuild(ctx context.Context, dec *decryptor, objects []*yaml.RNode, origins []string) ([]*yaml.RNode, error) {
	rep := Report{Settings: f.settings(), Substituted: map[string]int{}}
	var vars map[string]string
	var from map[string]string
	pb := f.spec.PostBuild
	if pb != nil {
		var err error
		if vars, from, err = f.variables(ctx); err != nil {
			return nil, err
		}
	}
	used := map[string]bool{}
	out := make([]*yaml.RNode, 0, len(objects))
	for i, o := range objects {
		subject := fmt.Sprintf("%s %s", o.GetKind(), strings.Trim(o.GetNamespace()+"/"+o.GetName(), "/"))
		if i < len(origins) && origins[i] != "" {
			subject += " (" + origins[i] + ")"
		}
		if dec != nil && !strings.EqualFold(o.GetAnnotations()[annotationDecrypt], disabled) {
			n, decrypted, err := dec.object(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("%s: decrypting %s: %w", f.Name(), subject, err)
			}
			if decrypted {
				rep.Decrypted = append(rep.Decrypted, strings.Trim(o.GetNamespace()+"/"+o.GetName(), "/"))
				o = n
			}
		}
		if pb != nil && (len(vars) > 0 || pb.SubstituteStrategy == substituteAlways) &&
			o.GetLabels()[annotationSubst] != disabled && o.GetAnnotations()[annotationSubst] != disabled {
			n, err := f.substitute(ctx, o, vars, used)
			if err != nil {
				return nil, fmt.Errorf("%s: post-build substitution in %s: %w", f.Name(), subject, err)
			}
			o = n
		}
		if err := normalize(o); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", f.Name(), subject, err)
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[labelFluxName], labels[labelFluxNamespace] = f.Ref.Name, f.Ref.Namespace
		var annotations map[string]string
		if m := f.spec.CommonMetadata; m != nil {
			maps.Copy(labels, m.Labels)
			if len(m.Annotations) > 0 {
				annotations = o.GetAnnotations()
				if annotations == nil {
					annotations = map[string]string{}
				}
				maps.Copy(annotations, m.Annotations)
			}
		}
		if err := o.SetLabels(labels); err != nil {
			return nil, err
		}
		if annotations != nil {
			if err := o.SetAnnotations(annotations); err != nil {
				return nil, err
			}
		}
		out = append(out, o)
	}
	if dec != nil && dec.sourcesDecrypted() {
		// A Secret generated from decrypted files is masked as a
		// decrypted one is (which generator made which is not known).
		for _, o := range out {
			name := strings.Trim(o.GetNamespace()+"/"+o.GetName(), "/")
			if secrets.IsSecret(o) && !slices.Contains(rep.Decrypted, name) {
				rep.Decrypted = append(rep.Decrypted, name)
			}
		}
	}
	for name := range used {
		rep.Substituted[from[name]]++
	}
	f.mu.Lock()
	f.last = rep
	f.mu.Unlock()
	return out, nil
}

// normalize makes an object what kustomize-controller applies of it: a
// Secret's stringData moved into its data, and the TCP protocol every
// container and Service port defaults to written out (as Flux does, so
// that server-side apply owns what the API server stores).
func normalize(o *yaml.RNode) error {
	switch {
	case secrets.IsSecret(o):
		sd := o.Field("stringData")
		if sd == nil || sd.Value.YNode().Kind != yaml.MappingNode || len(sd.Value.YNode().Content) == 0 {
			return nil
		}
		data, err := o.Pipe(yaml.LookupCreate(yaml.MappingNode, "data"))
		if err != nil {
			return err
		}
		c := sd.Value.YNode().Content
		for i := 0; i+1 < len(c); i += 2 {
			v := base64.StdEncoding.EncodeToString([]byte(c[i+1].Value))
			if err := data.PipeE(yaml.SetField(c[i].Value, yaml.NewStringRNode(v))); err != nil {
				return err
			}
		}
		return o.PipeE(yaml.Clear("stringData"))
	case o.GetKind() == "Service" && o.GetApiVersion() == "v1":
		return defaultProtocol(o, "spec", "ports")
	}
	var pod []string
	switch o.GetKind() {
	case "Pod":
		pod = []string{"spec"}
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		pod = []string{"spec", "template", "spec"}
	case "CronJob":
		pod = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return nil
	}
	containers, err := o.Pipe(yaml.Lookup(append(pod, "containers")...))
	if err != nil || containers == nil {
		return err
	}
	items, err := containers.Elements()
	if err != nil {
		return nil
	}
	for _, c := range items {
		if err := defaultProtocol(c, "ports"); err != nil {
			return err
		}
	}
	return nil
}

// defaultProtocol sets protocol TCP on the ports at path that have none.
func defaultProtocol(o *yaml.RNode, path ...string) error {
	ports, err := o.Pipe(yaml.Lookup(path...))
	if err != nil || ports == nil {
		return err
	}
	items, err := ports.Elements()
	if err != nil {
		return nil
	}
	for _, p := range items {
		if p.Field("protocol") == nil {
			if err := p.PipeE(yaml.SetField("protocol", yaml.NewStringRNode("TCP"))); err != nil {
				return err
			}
		}
	}
	return nil
}

var varName = regexp.MustCompile(`^[_[:alpha:]][_[:alpha:][:digit:]]*$`)

// variables reads the substitution variables as kustomize-controller
// does: the substituteFrom ConfigMaps' and Secrets' keys in order (an
// optional one that is missing skipped), the inline substitute over
// them, newlines taken out of every value. from says where each came
// from.
func (f *Flux) variables(ctx context.Context) (vars, from map[string]string, err error) {
	vars, from = map[string]string{}, map[string]string{}
	size := 0
	add := func(k, v, src string) error {
		size += len(k) + len(v)
		if len(vars) >= maxVariables || size > maxVariablesBytes {
			return fmt.Errorf("%s: spec.postBuild: more than %d variables or %d MiB of them", f.Name(), maxVariables, maxVariablesBytes>>20)
		}
		vars[k], from[k] = v, src
		return nil
	}
	// Each reference loaded by kustomize-controller's own loader
	// (fluxcd/pkg/kustomize), one at a time so that the report can say
	// where each variable came from; later ones override earlier ones,
	// as in one load.
	refs, _, _ := unstructured.NestedSlice(f.obj.Object, "spec", "postBuild", "substituteFrom")
	for i, ref := range f.spec.PostBuild.SubstituteFrom {
		if ref.Kind != "ConfigMap" && ref.Kind != "Secret" {
			return nil, nil, fmt.Errorf("%s: spec.postBuild.substituteFrom[%d].kind %q: must be ConfigMap or Secret", f.Name(), i, ref.Kind)
		}
		one := f.obj.DeepCopy()
		if err := unstructured.SetNestedSlice(one.Object, []any{refs[i]}, "spec", "postBuild", "substituteFrom"); err != nil {
			return nil, nil, err
		}
		data, err := fluxkustomize.LoadVariables(ctx, f.kube, *one)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: spec.postBuild.substituteFrom[%d]: %w", f.Name(), i, err)
		}
		src := ref.Kind + " " + ref.Name
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if err := add(k, data[k], src); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.spec.PostBuild.Substitute)) {
		if err := add(k, strings.ReplaceAll(f.spec.PostBuild.Substitute[k], "\n", ""), sourceInlineVarName); err != nil {
			return nil, nil, err
		}
	}
	for k := range vars {
		if !varName.MatchString(k) {
			return nil, nil, fmt.Errorf("%s: variable %q (from %s): a name must match %s", f.Name(), k, from[k], varName)
		}
	}
	return vars, from, nil
}

// substitute replaces ${var} expressions in an object as
// kustomize-controller does: on the object's YAML (as kustomize prints a
// resource: its JSON turned into YAML), then read back. A variable that
// is not set and has no default fails, as kustomize-controller v1.9's
// default StrictPostBuildSubstitutions makes it.
func (f *Flux) substitute(ctx context.Context, o *yaml.RNode, vars map[string]string, used map[string]bool) (*yaml.RNode, error) {
	j, err := o.MarshalJSON()
	if err != nil {
		return nil, err
	}
	res, err := resourceFactory.FromBytes(j)
	if err != nil {
		return nil, err
	}
	// kustomize-controller's own substitution (fluxcd/pkg/kustomize), as
	// v1.9.6 makes it (strict: a variable neither set nor defaulted is an
	// error), over the variables loaded once for the render: given as
	// the Kustomization's inline ones, with the cluster left alone.
	k := f.obj.DeepCopy()
	inline := make(map[string]any, len(vars))
	for name, v := range vars {
		inline[name] = v
	}
	if err := unstructured.SetNestedField(k.Object, inline, "spec", "postBuild", "substitute"); err != nil {
		return nil, err
	}
	out, err := fluxkustomize.SubstituteVariables(ctx, nil, *k, res, fluxkustomize.SubstituteWithDryRun(true),
		fluxkustomize.SubstituteWithStrict(true), fluxkustomize.SubstituteWithAlways(f.spec.PostBuild.SubstituteStrategy == substituteAlways))
	if err != nil {
		return nil, fmt.Errorf("%w: set it in spec.postBuild.substitute or substituteFrom, or give it a default (${var:=default}), as kustomize-controller requires", err)
	}
	if out == nil {
		return o, nil
	}
	// Which variables it used, for the report only.
	if text, err := sigsyaml.JSONToYAML(j); err == nil {
		envsubst.Eval(string(text), func(name string) (string, bool) {
			v, ok := vars[name]
			if ok {
				used[name] = true
			}
			return v, ok
		})
	}
	j, err = out.MarshalJSON()
	if err != nil {
		return nil, err
	}
	n := yaml.NewMapRNode(nil)
	if err := n.UnmarshalJSON(j); err != nil {
		return nil, err
	}
	return n, nil
}

// resourceFactory makes kustomize resources of objects, for
// fluxcd/pkg/kustomize.
var resourceFactory = provider.NewDefaultDepProvider().GetResourceFactory()
