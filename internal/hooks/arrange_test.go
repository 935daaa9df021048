package hooks

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
)

// chart is a render as helm template prints it: the release's objects,
// then its hooks (a test, a delete hook, RBAC of both phases, weighted
// Jobs before and after).
const chart = `# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
---
# Source: web/templates/webhook.yaml
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: web}
---
# Source: web/templates/rbac.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: web-admission
  namespace: shop
  annotations: {helm.sh/hook: "pre-install,pre-upgrade,post-install,post-upgrade", helm.sh/hook-delete-policy: "before-hook-creation,hook-succeeded", helm.sh/hook-weight: "-5"}
---
# Source: web/templates/create.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-create
  namespace: shop
  annotations: {helm.sh/hook: "pre-install,pre-upgrade", helm.sh/hook-delete-policy: "before-hook-creation,hook-succeeded"}
spec:
  ttlSecondsAfterFinished: 0
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: certgen}]}}
---
# Source: web/templates/patch.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-patch
  namespace: shop
  annotations: {helm.sh/hook: "post-install,post-upgrade", helm.sh/hook-weight: "1"}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: certgen}]}}
---
# Source: web/templates/check.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-check
  namespace: shop
  annotations: {helm.sh/hook: post-install, helm.sh/hook-weight: "1"}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: check}]}}
---
# Source: web/templates/cleanup.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-cleanup
  namespace: shop
  annotations: {helm.sh/hook: pre-delete}
spec:
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: cleanup}]}}
---
# Source: web/templates/tests/test.yaml
apiVersion: v1
kind: Pod
metadata:
  name: web-test-x7k2p
  namespace: shop
  annotations: {helm.sh/hook: test-success}
spec: {containers: [{name: t, image: curl}]}
`

func parseChart(t *testing.T) []*yaml.RNode {
	t.Helper()
	objs, err := kio.FromBytes([]byte(chart))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func names(objs []*yaml.RNode) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(out, " ")
}

var phases = &v1alpha1.FluxPhases{SourceRef: v1alpha1.FluxSourceRef{Name: "deploy"}}

func TestHooksArrangedForEachDeployer(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		objects string   // the folder's own objects
		phases  []string // dir: objects
		warned  []string // objects warned of
	}{
		{
			name:    "Argo CD maps Helm's hooks to its own phases: all as rendered, but the test and the delete hook",
			o:       Options{Tool: v1alpha1.DeployerArgoCD},
			objects: "Deployment/web ValidatingWebhookConfiguration/web ServiceAccount/web-admission Job/web-create Job/web-patch Job/web-check",
			warned:  []string{"Job/shop/web-cleanup"},
		},
		{
			name:    "kubectl applies every hook with the release, and says so",
			o:       Options{Tool: v1alpha1.DeployerKubectl},
			objects: "Deployment/web ValidatingWebhookConfiguration/web ServiceAccount/web-admission Job/web-create Job/web-patch Job/web-check",
			warned:  []string{"Job/shop/web-cleanup", "ServiceAccount/shop/web-admission", "Job/shop/web-create", "Job/shop/web-patch", "Job/shop/web-check"},
		},
		{
			name:    "Flux without phases: the same, re-created when they change",
			o:       Options{Tool: v1alpha1.DeployerFlux},
			objects: "Deployment/web ValidatingWebhookConfiguration/web ServiceAccount/web-admission Job/web-create Job/web-patch Job/web-check",
			warned:  []string{"Job/shop/web-cleanup", "ServiceAccount/shop/web-admission", "Job/shop/web-create", "Job/shop/web-patch", "Job/shop/web-check"},
		},
		{
			name: "Flux in phases: pre hooks by weight, the release, post hooks by weight; a hook of both phases runs before",
			o:    Options{Tool: v1alpha1.DeployerFlux, Flux: phases, Name: "web", Path: "apps/web"},
			phases: []string{
				"pre-1: ServiceAccount/web-admission",
				"pre-2: Job/web-create",
				"release: Deployment/web ValidatingWebhookConfiguration/web",
				"post-1: Job/web-check Job/web-patch",
			},
			// what kustomize-controller keeps (hook-succeeded), what runs
			// once at install in Helm, and the delete hook.
			warned: []string{"Job/shop/web-cleanup", "ServiceAccount/shop/web-admission", "Job/shop/web-create", "Job/shop/web-check"},
		},
		{
			name:    "tests kept when asked",
			o:       Options{Tool: v1alpha1.DeployerArgoCD, HelmTests: true},
			objects: "Deployment/web ValidatingWebhookConfiguration/web ServiceAccount/web-admission Job/web-create Job/web-patch Job/web-check Pod/web-test-x7k2p",
			warned:  []string{"Job/shop/web-cleanup"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Arrange(parseChart(t), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(l.Objects); got != tt.objects {
				t.Errorf("objects: %s\nwant      %s", got, tt.objects)
			}
			var got []string
			for _, p := range l.Phases {
				got = append(got, p.Dir+": "+names(p.Objects))
			}
			if strings.Join(got, "\n") != strings.Join(tt.phases, "\n") {
				t.Errorf("phases:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.phases, "\n"))
			}
			warned := map[string]bool{}
			for _, w := range l.Warnings {
				warned[strings.Fields(w)[0]] = true
			}
			for _, w := range tt.warned {
				if !warned[w] {
					t.Errorf("no warning of %s: %v", w, l.Warnings)
				}
			}
			if len(warned) != len(tt.warned) {
				t.Errorf("warnings: %v, want of %v", l.Warnings, tt.warned)
			}
			if len(l.Hooks) != 6 { // every hook but none of the release's objects
				t.Errorf("%d hooks recorded: %v", len(l.Hooks), l.Hooks)
			}
		})
	}
}

// Flux's phases are Kustomizations applying the subfolders one after
// another, waiting for each; hook phases re-create what changed; a hook
// Job that Kubernetes deletes once finished is kept instead (or
// kustomize-controller would run it again at every interval).
func TestFluxPhasesAreKustomizationsInOrder(t *testing.T) {
	objs := parseChart(t)
	l, err := Arrange(objs, Options{Tool: v1alpha1.DeployerFlux, Flux: phases, Name: "web", Path: "apps/web", Decrypt: true})
	if !errors.Is(err, ErrNoDecryption) {
		t.Fatalf("encrypted Secrets and no decryption Secret: %v", err)
	}
	p := *phases
	p.DecryptionSecretRef = &v1alpha1.SecretRef{Name: "sops-age"}
	l, err = Arrange(parseChart(t), Options{Tool: v1alpha1.DeployerFlux, Flux: &p, Name: "web", Path: "apps/web", Decrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kio.FromBytes(l.Files[PhasesFile])
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, path, dependsOn, force string }{
		{"web-pre-1", "./apps/web/pre-1", "", "true"},
		{"web-pre-2", "./apps/web/pre-2", "web-pre-1", "true"},
		{"web-release", "./apps/web/release", "web-pre-2", ""},
		{"web-post-1", "./apps/web/post-1", "web-release", "true"},
	}
	if len(ks) != len(want) {
		t.Fatalf("%d Kustomizations:\n%s", len(ks), l.Files[PhasesFile])
	}
	for i, w := range want {
		k := ks[i]
		get := func(path ...string) string {
			n, err := k.Pipe(yaml.Lookup(path...))
			if err != nil || n == nil {
				return ""
			}
			return yaml.GetValue(n)
		}
		if k.GetName() != w.name || k.GetNamespace() != "flux-system" || get("spec", "path") != w.path || get("spec", "force") != w.force ||
			get("spec", "wait") != "true" || get("spec", "prune") != "true" || get("spec", "sourceRef", "name") != "deploy" || get("spec", "decryption", "secretRef", "name") != "sops-age" {
			t.Errorf("Kustomization %d:\n%s", i, k.MustString())
		}
		if dep, _ := k.Pipe(yaml.Lookup("spec", "dependsOn", "0", "name")); (dep == nil && w.dependsOn != "") || (dep != nil && yaml.GetValue(dep) != w.dependsOn) {
			t.Errorf("%s depends on %v, want %q", w.name, dep, w.dependsOn)
		}
	}
	if !strings.Contains(string(l.Files[KustomizationFile]), "- "+PhasesFile) {
		t.Errorf("kustomization.yaml: %s", l.Files[KustomizationFile])
	}
	create := l.Phases[1].Objects[0]
	if n, _ := create.Pipe(yaml.Lookup("spec", "ttlSecondsAfterFinished")); n != nil {
		t.Errorf("the create Job keeps its ttlSecondsAfterFinished:\n%s", create.MustString())
	}
}

// A phase's Kustomization is named after the sync within 63 characters:
// kustomize-controller labels what it applies with the name.
func TestPhaseNamesFitALabel(t *testing.T) {
	long := strings.Repeat("a-very-long-sync-name-", 5)
	for _, dir := range []string{"pre-12", ReleaseDir} {
		n := phaseName(long, dir)
		if len(n) > 63 || !strings.HasSuffix(n, "-"+dir) {
			t.Errorf("%s: %q", dir, n)
		}
	}
	if phaseName(long+"x", "release") == phaseName(long+"y", "release") {
		t.Error("two long names give one phase name")
	}
}
