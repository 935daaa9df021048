package hooks

import (
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/render"
)

// Helm's hook annotations.
const (
	annotationHook         = "helm.sh/hook"
	annotationWeight       = "helm.sh/hook-weight"
	annotationDeletePolicy = "helm.sh/hook-delete-policy"
)

// Helm's hook events, as helm's manifest sorter reads them.
const (
	preInstall   = "pre-install"
	postInstall  = "post-install"
	preUpgrade   = "pre-upgrade"
	postUpgrade  = "post-upgrade"
	preDelete    = "pre-delete"
	postDelete   = "post-delete"
	preRollback  = "pre-rollback"
	postRollback = "post-rollback"
	test         = "test"
)

// events maps what helm reads in helm.sh/hook to the event it means
// ("test-success" is the old name of test).
var events = map[string]string{
	preInstall: preInstall, postInstall: postInstall, preUpgrade: preUpgrade, postUpgrade: postUpgrade,
	preDelete: preDelete, postDelete: postDelete, preRollback: preRollback, postRollback: postRollback,
	test: test, "test-success": test,
}

// Helm's delete policies.
const (
	beforeHookCreation = "before-hook-creation"
	hookSucceeded      = "hook-succeeded"
	hookFailed         = "hook-failed"
)

// hook is one object of a render that Helm takes for a hook.
type hook struct {
	obj *yaml.RNode
	// index is its place in the render.
	index    int
	events   []string
	weight   int
	policies []string // as written; Helm's default (before-hook-creation) when none
	template string
}

// parse reads an object's hook annotations as helm's manifest sorter
// does. ok is false for an object that is no hook. An object with an
// event helm does not know is not in a render at all (helm leaves it out
// of `helm template` and of an install).
func parse(obj *yaml.RNode, index int) (h hook, ok bool) {
	a := obj.GetAnnotations()
	value, isHook := a[annotationHook]
	if !isHook {
		return h, false
	}
	h = hook{obj: obj, index: index, template: render.Source(obj)}
	for _, e := range strings.Split(value, ",") {
		if ev, known := events[strings.ToLower(strings.TrimSpace(e))]; known && !slices.Contains(h.events, ev) {
			h.events = append(h.events, ev)
		}
	}
	h.weight, _ = strconv.Atoi(a[annotationWeight])
	if p, ok := a[annotationDeletePolicy]; ok {
		for _, v := range strings.Split(p, ",") {
			if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
				h.policies = append(h.policies, v)
			}
		}
	}
	return h, true
}

// deletePolicies are the policies Helm applies: the written ones, or
// before-hook-creation when none is written.
func (h hook) deletePolicies() []string {
	if len(h.policies) == 0 {
		return []string{beforeHookCreation}
	}
	return h.policies
}

func (h hook) has(events ...string) bool {
	for _, e := range events {
		if slices.Contains(h.events, e) {
			return true
		}
	}
	return false
}

// isTest reports whether Helm runs the hook only for `helm test`.
func (h hook) isTest() bool {
	return h.has(test) && !h.has(preInstall, postInstall, preUpgrade, postUpgrade, preDelete, postDelete, preRollback, postRollback)
}

// atInstall reports whether Helm runs it at install or upgrade.
func (h hook) atInstall() bool {
	return h.has(preInstall, postInstall, preUpgrade, postUpgrade)
}

// pre reports whether it runs before the release's objects (else after).
func (h hook) pre() bool { return h.has(preInstall, preUpgrade) }

// isJob reports whether Helm waits for it to complete (a Job or a Pod).
func (h hook) waited() bool {
	k := h.obj.GetKind()
	return k == "Job" || k == "Pod"
}

// record is the hook as the provenance record says it.
func (h hook) record(applied, unsupported string) v1alpha1.Hook {
	return v1alpha1.Hook{
		Object: objectName(h.obj), Template: h.template, Events: h.events, Weight: h.weight,
		DeletePolicies: h.policies, Applied: applied, Unsupported: unsupported,
	}
}

// objectName is Kind/namespace/name, or Kind/name without a namespace.
func objectName(o *yaml.RNode) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + "/" + ns + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetName()
}

// LeftOut reports whether Arrange leaves an object out of every folder:
// a test (unless tests are kept), or a hook Helm runs neither at install
// nor at upgrade.
func LeftOut(obj *yaml.RNode, helmTests bool) bool {
	h, ok := parse(obj, 0)
	if !ok {
		return false
	}
	if h.isTest() {
		return !helmTests
	}
	return !h.atInstall()
}

// Unkeyed finds an object a folder keeps whose template generated values
// at random, without the sync key (unkeyed lists those templates): kept,
// it would change at every render. It returns nil and "" when none is.
// An object left out (a test) may hold such values.
func Unkeyed(objs []*yaml.RNode, unkeyed []string, helmTests bool) (*yaml.RNode, string) {
	if len(unkeyed) == 0 {
		return nil, ""
	}
	set := map[string]bool{}
	for _, t := range unkeyed {
		set[t] = true
	}
	for _, o := range objs {
		if t := render.Source(o); set[t] && !LeftOut(o, helmTests) {
			return o, t
		}
	}
	return nil, ""
}
