package hooks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// The files of a phased folder.
const (
	// PhasesFile holds the Flux Kustomizations that apply the phases.
	PhasesFile = "phases.yaml"
	// KustomizationFile lists PhasesFile alone, so that a Flux
	// Kustomization of the folder (or of a folder above it, whose
	// generated kustomization takes a folder that has one whole) applies
	// the phases' Kustomizations, and not the phases' objects at once.
	KustomizationFile = "kustomization.yaml"
	// ReleaseDir is the phase of the release's own objects.
	ReleaseDir = "release"
)

// Defaults of FluxPhases.
const (
	defaultInterval  = 10 * time.Minute
	defaultTimeout   = 5 * time.Minute
	defaultNamespace = "flux-system"
)

// ErrNoDecryption is the error of a phased folder with encrypted Secrets
// whose phases are told no decryption Secret.
var ErrNoDecryption = errors.New("the folder's Secrets are SOPS-encrypted and its hooks run in phases, each applied by a Flux Kustomization of its own: name the Secret of SOPS keys they decrypt with in spec.deployer.flux.decryptionSecretRef")

// phase lays the chart out as Helm installs it: the pre-install and
// pre-upgrade hooks, a subfolder per weight in Helm's order, then the
// release's objects, then the post-install and post-upgrade hooks. Each
// subfolder is applied by a Flux Kustomization that depends on the one
// before and waits for its objects (a Job: completed), as Helm waits for
// a hook before the next; a hook phase is applied with force, so that a
// changed hook Job is re-created, as Helm re-creates a hook
// (before-hook-creation), where applying it over the old one would fail.
func (l *Layout) phase(release []*yaml.RNode, lifecycle []hook, o Options) error {
	f := o.Flux
	if o.Decrypt && (f.DecryptionSecretRef == nil || f.DecryptionSecretRef.Name == "") {
		return ErrNoDecryption
	}
	sort.SliceStable(lifecycle, func(i, j int) bool {
		a, b := lifecycle[i], lifecycle[j]
		if a.weight != b.weight {
			return a.weight < b.weight
		}
		return a.obj.GetName() < b.obj.GetName()
	})
	var pre, post []hook
	for _, h := range lifecycle {
		if h.pre() {
			pre = append(pre, h) // a hook of both runs first before: it stays
		} else {
			post = append(post, h)
		}
	}
	byWeight := func(hs []hook, prefix string) {
		for i, n := 0, 1; i < len(hs); n++ {
			j := i
			for j < len(hs) && hs[j].weight == hs[i].weight {
				j++
			}
			l.Phases = append(l.Phases, Phase{Dir: fmt.Sprintf("%s-%d", prefix, n), Objects: objectsOf(hs[i:j]), hook: true})
			i = j
		}
	}
	byWeight(pre, "pre")
	l.Phases = append(l.Phases, Phase{Dir: ReleaseDir, Objects: release})
	byWeight(post, "post")
	for i := range l.Phases {
		l.Phases[i].Kustomization = phaseName(o.Name, l.Phases[i].Dir)
	}
	for _, h := range lifecycle {
		recreate(h)
		for _, p := range l.Phases {
			if containsObject(p.Objects, h.obj) {
				applied := fmt.Sprintf("phase %s: Flux Kustomization %s", p.Dir, p.Kustomization)
				why := strings.TrimPrefix(differences(h, "kustomize-controller"), "; ")
				l.Hooks = append(l.Hooks, h.record(applied, why))
				if why != "" {
					l.warn(h, why)
				}
			}
		}
	}
	ks, err := l.kustomizations(o)
	if err != nil {
		return err
	}
	l.Files = map[string][]byte{
		PhasesFile: ks,
		KustomizationFile: []byte("# Written by Sluice: the chart's hooks run in Helm's phases, each phase a subfolder\n" +
			"# applied by one of the Flux Kustomizations of " + PhasesFile + ", one after another.\n" +
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + PhasesFile + "\n"),
	}
	return nil
}

func containsObject(objs []*yaml.RNode, obj *yaml.RNode) bool {
	for _, o := range objs {
		if o == obj {
			return true
		}
	}
	return false
}

// phaseName names a phase's Kustomization after the sync: at most 63
// characters, as kustomize-controller labels what it applies with it.
func phaseName(sync, dir string) string {
	name := sync + "-" + dir
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(sync))
	keep := 63 - len(dir) - 1 - 9
	return strings.TrimRight(sync[:keep], "-.") + "-" + hex.EncodeToString(sum[:4]) + "-" + dir
}

// kustomizations are the phases' Flux Kustomizations, as YAML documents.
func (l *Layout) kustomizations(o Options) ([]byte, error) {
	f := o.Flux
	ns := f.Namespace
	if ns == "" {
		ns = f.SourceRef.Namespace
	}
	if ns == "" {
		ns = defaultNamespace
	}
	srcNS := f.SourceRef.Namespace
	if srcNS == "" {
		srcNS = defaultNamespace
	}
	source := map[string]any{"kind": "GitRepository", "name": f.SourceRef.Name}
	if f.SourceRef.Kind != "" {
		source["kind"] = f.SourceRef.Kind
	}
	if srcNS != ns {
		source["namespace"] = srcNS
	}
	interval, timeout := defaultInterval, defaultTimeout
	if f.Interval != nil {
		interval = f.Interval.Duration
	}
	if f.Timeout != nil {
		timeout = f.Timeout.Duration
	}
	var docs []string
	for i, p := range l.Phases {
		spec := map[string]any{
			"interval":  interval.String(),
			"timeout":   timeout.String(),
			"path":      "./" + path.Join(o.Path, p.Dir),
			"prune":     true,
			"wait":      true,
			"sourceRef": source,
		}
		if p.hook {
			spec["force"] = true
		}
		if i > 0 {
			spec["dependsOn"] = []any{map[string]any{"name": l.Phases[i-1].Kustomization}}
		}
		if f.ServiceAccountName != "" {
			spec["serviceAccountName"] = f.ServiceAccountName
		}
		if r := f.DecryptionSecretRef; o.Decrypt && r != nil {
			spec["decryption"] = map[string]any{"provider": "sops", "secretRef": map[string]any{"name": r.Name}}
		}
		obj := map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
			"kind":       "Kustomization",
			"metadata":   map[string]any{"name": p.Kustomization, "namespace": ns, "labels": labels(o.Name, p.Dir)},
			"spec":       spec,
		}
		data, err := sigsyaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(data))
	}
	return []byte(strings.Join(docs, "---\n")), nil
}

// Phased reports whether a layout runs its hooks in phases.
func (l *Layout) Phased() bool { return len(l.Phases) > 0 }

// labels say which sync and phase a Kustomization is of (the sync's name
// where it fits a label).
func labels(sync, dir string) map[string]any {
	l := map[string]any{"sluice.dev/phase": dir}
	if len(sync) <= 63 {
		l["sluice.dev/sync"] = sync
	}
	return l
}
