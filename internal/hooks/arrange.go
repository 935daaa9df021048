package hooks

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
)

// Options say who deploys a folder.
type Options struct {
	// Tool is v1alpha1.DeployerFlux (also for ""), DeployerArgoCD or
	// DeployerKubectl.
	Tool string
	// HelmTests keeps the chart's test hooks.
	HelmTests bool
	// Flux, for the flux tool, runs the hooks in Helm's phases.
	Flux *v1alpha1.FluxPhases
	// Name names the phase Kustomizations (the sync's name).
	Name string
	// Path is the folder's path in its branch: where the phase
	// Kustomizations find their subfolders.
	Path string
	// Decrypt says the folder holds SOPS-encrypted Secrets: the phase
	// Kustomizations decrypt them.
	Decrypt bool
}

// Layout is a render arranged for its deployer.
type Layout struct {
	// Objects are the objects of the folder itself (with phases, none:
	// Files holds the Kustomizations that apply them).
	Objects []*yaml.RNode
	// Phases are the subfolders a Flux deployer applies one after
	// another, in that order.
	Phases []Phase
	// Files are the folder's own files besides its objects' (with phases,
	// the Flux Kustomizations of the phases and the kustomization.yaml
	// that lists only them).
	Files map[string][]byte
	// Hooks say what became of each hook.
	Hooks []v1alpha1.Hook
	// Warnings say, one line each and naming the hook, where the deployer
	// does not do what Helm does.
	Warnings []string
}

// Phase is one subfolder of a phased folder.
type Phase struct {
	// Dir is the subfolder.
	Dir string
	// Kustomization is the Flux Kustomization that applies it.
	Kustomization string
	Objects       []*yaml.RNode
	hook          bool
}

// Arrange arranges a chart's rendered objects (in `helm template`'s
// order: the release's objects, then its hooks) for the tool that deploys
// them. It changes the objects it is given (annotations, a hook Job's
// ttlSecondsAfterFinished).
func Arrange(objs []*yaml.RNode, o Options) (*Layout, error) {
	l := &Layout{}
	var release []*yaml.RNode
	var lifecycle []hook
	for i, obj := range objs {
		h, ok := parse(obj, i)
		if !ok {
			release = append(release, obj)
			continue
		}
		switch {
		case h.isTest():
			if o.HelmTests {
				release = append(release, obj)
				l.Hooks = append(l.Hooks, h.record("with the rest of the folder (spec.deployer.helmTests)", ""))
			} else {
				l.Hooks = append(l.Hooks, h.record("left out: a test, which `helm test` runs and `helm install` does not", ""))
			}
		case !h.atInstall():
			why := fmt.Sprintf("Helm runs it at %s; %s never does", when(h.events), ToolName(o.Tool))
			l.Hooks = append(l.Hooks, h.record("left out", why))
			l.warn(h, "left out: "+why)
		default:
			lifecycle = append(lifecycle, h)
		}
	}
	switch {
	case o.Tool == v1alpha1.DeployerArgoCD:
		l.Objects = objs[:0:0]
		for _, obj := range objs {
			if keep(obj, release, lifecycle) {
				l.Objects = append(l.Objects, obj)
			}
		}
		for _, h := range lifecycle {
			l.Hooks = append(l.Hooks, h.record(argoPhases(h), ""))
		}
	case o.Tool == v1alpha1.DeployerKubectl:
		l.Objects = append(release, objectsOf(lifecycle)...)
		for _, h := range lifecycle {
			why := "kubectl applies it with the rest of the folder, not " + order(h) + differences(h, "kubectl")
			l.Hooks = append(l.Hooks, h.record("with the rest of the folder", why))
			l.warn(h, why)
		}
	case o.Flux == nil || len(lifecycle) == 0:
		l.Objects = append(release, objectsOf(lifecycle)...)
		for _, h := range lifecycle {
			recreate(h)
			why := "kustomize-controller applies it with the rest of the folder, not " + order(h) + " (spec.deployer.flux runs hooks in Helm's phases)" + differences(h, "kustomize-controller")
			l.Hooks = append(l.Hooks, h.record("with the rest of the folder, re-created when it changes", why))
			l.warn(h, why)
		}
	default:
		if err := l.phase(release, lifecycle, o); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(l.Hooks, func(i, j int) bool { return l.Hooks[i].Object < l.Hooks[j].Object })
	return l, nil
}

func (l *Layout) warn(h hook, why string) {
	l.Warnings = append(l.Warnings, fmt.Sprintf("%s (%s, %s): %s", objectName(h.obj), strings.Join(h.events, ","), h.template, why))
}

// keep reports whether obj is among the objects kept.
func keep(obj *yaml.RNode, release []*yaml.RNode, lifecycle []hook) bool {
	for _, r := range release {
		if r == obj {
			return true
		}
	}
	for _, h := range lifecycle {
		if h.obj == obj {
			return true
		}
	}
	return false
}

func objectsOf(hs []hook) []*yaml.RNode {
	out := make([]*yaml.RNode, len(hs))
	for i, h := range hs {
		out[i] = h.obj
	}
	return out
}

// ToolName is a deployer's name in a sentence.
func ToolName(tool string) string {
	switch tool {
	case v1alpha1.DeployerArgoCD:
		return "Argo CD"
	case v1alpha1.DeployerKubectl:
		return "kubectl apply"
	}
	return "Flux's kustomize-controller"
}

// when says when Helm runs hooks of events that are not install's or
// upgrade's.
func when(events []string) string {
	var out []string
	for _, e := range events {
		switch e {
		case preDelete, postDelete:
			out = append(out, "`helm uninstall` ("+e+")")
		case preRollback, postRollback:
			out = append(out, "`helm rollback` ("+e+")")
		}
	}
	return strings.Join(out, " and ")
}

// order says when Helm runs a lifecycle hook.
func order(h hook) string {
	switch {
	case h.pre() && h.has(postInstall, postUpgrade):
		return "before and again after the release's objects as Helm does"
	case h.pre():
		return "before the release's objects as Helm does"
	}
	return "after the release's objects are ready as Helm does"
}

// differences says what a tool that applies the hook as an object does
// unlike Helm, beyond its order.
func differences(h hook, tool string) string {
	var out []string
	for _, p := range h.deletePolicies() {
		switch p {
		case hookSucceeded:
			out = append(out, tool+" keeps it once it succeeds, where Helm deletes it (hook-succeeded)")
		case hookFailed:
			out = append(out, tool+" keeps it if it fails, where Helm deletes it (hook-failed)")
		}
	}
	if ttl(h) && tool == "kustomize-controller" {
		out = append(out, "its ttlSecondsAfterFinished is left out, or kustomize-controller would create it again, and run it again, at every interval once Kubernetes deleted it")
	}
	if h.has(preInstall, postInstall) && !h.has(preUpgrade, postUpgrade) {
		out = append(out, "Helm runs it at install only; "+tool+" applies it again whenever it changes")
	}
	if h.has(preUpgrade, postUpgrade) && !h.has(preInstall, postInstall) {
		out = append(out, "Helm runs it at upgrade only; "+tool+" applies it at the first hydration too")
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// ttl reports whether a hook is a Job Kubernetes deletes once finished.
func ttl(h hook) bool {
	if h.obj.GetKind() != "Job" {
		return false
	}
	n, err := h.obj.Pipe(yaml.Lookup("spec", "ttlSecondsAfterFinished"))
	return err == nil && n != nil
}

// recreate marks a hook for Flux: kustomize-controller re-creates it when
// a change cannot be applied over it (a Job's template is immutable), as
// Helm re-creates a hook (before-hook-creation), and keeps it once
// finished (a Job Kubernetes deleted would be created, and run, again).
func recreate(h hook) {
	_ = h.obj.PipeE(yaml.SetAnnotation("kustomize.toolkit.fluxcd.io/force", "Enabled"))
	if ttl(h) {
		_ = h.obj.PipeE(yaml.Lookup("spec"), yaml.Clear("ttlSecondsAfterFinished"))
	}
}

// argoPhases says which of Argo CD's sync phases a hook runs in: Argo CD
// maps pre-install and pre-upgrade to PreSync, post-install and
// post-upgrade to PostSync, the hook's weight to its wave.
func argoPhases(h hook) string {
	var phases []string
	if h.pre() {
		phases = append(phases, "PreSync")
	}
	if h.has(postInstall, postUpgrade) {
		phases = append(phases, "PostSync")
	}
	return fmt.Sprintf("Argo CD's %s hook, wave %d", strings.Join(phases, " and "), h.weight)
}
