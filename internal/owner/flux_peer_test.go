package owner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/testenv"
)

// fluxCase is a folder and the Kustomization that deploys it; what the
// real kustomize-controller applies of it is the expectation.
type fluxCase struct {
	name  string
	files map[string]string
	spec  string
	// report is Sluice's own account of what the settings did.
	report string
	// fails, when set, is what kustomize-controller's build failure and
	// Sluice's render error must both say.
	fails string
}

var fluxCases = []fluxCase{{
	name: "generated",
	// No kustomization: kustomize-controller generates one over the
	// manifests (a sub-kustomization whole, what source-controller
	// leaves out of the artifact left out).
	files: map[string]string{
		"generated/web.yaml":                  deployment,
		"generated/more/cm.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: more}\n",
		"generated/sub/kustomization.yaml":    "resources: [a.yaml]\nnamePrefix: sub-\n",
		"generated/sub/a.yaml":                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"generated/sub/unlisted.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unlisted}\n",
		"generated/.sops.yaml":                "creation_rules: [{age: x}]\n",
		"generated/.github/workflows/ci.yaml": "on: push\n",
		"generated/README.md":                 "# apps\n",
	},
	report: "targetNamespace NS",
}, {
	name: "amended",
	// The folder's kustomization amended: namespace replaced, names
	// prefixed and suffixed, an image's tag replaced (its newName kept),
	// patches, a component and a missing one ignored.
	files: map[string]string{
		"amended/kustomization.yaml":       "namespace: mine\nresources: [web.yaml]\nimages: [{name: registry.example.com/web, newName: mirror.example.com/web, newTag: '2.0'}]\n",
		"amended/web.yaml":                 deployment,
		"amended/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n",
		"amended/extra/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\n",
	},
	spec: `  namePrefix: eu-
  nameSuffix: "-1"
  images: [{name: registry.example.com/web, newTag: '3.0'}]
  components: [extra, missing]
  ignoreMissingComponents: true
  patches:
  - target: {kind: Deployment}
    patch: |
      - op: replace
        path: /spec/replicas
        value: 5
`,
	report: "targetNamespace NS, namePrefix eu-, nameSuffix -1, 1 patch, 1 image, 2 components",
}, {
	name: "substituted",
	// Post-build substitution: an operator (^^), a default, an object
	// that opts out, a number that stays a number; common metadata.
	files: map[string]string{
		"substituted/all.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data:
  domain: web.${cluster_domain}
  greeting: ${greeting:=hello}
  upper: ${cluster_domain^^}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: literal
  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}
data: {v: "${cluster_domain}"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web}]
`,
	},
	spec:   "  postBuild:\n    substitute: {cluster_domain: example.org, replicas: '3'}\n  commonMetadata: {labels: {team: shop}, annotations: {owner: shop}}\n",
	report: "targetNamespace NS, commonMetadata, 2 substitutions from spec.postBuild.substitute",
}, {
	name: "unset",
	// A variable that is not set and has no default: kustomize-controller
	// v1.9 substitutes strictly, and fails the build.
	files: map[string]string{
		"unset/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata:\n  domain: web.${cluster_domain}\n  missing: '[${nothing}]'\n",
	},
	spec:  "  postBuild:\n    substitute: {cluster_domain: example.org}\n",
	fails: `variable not set (strict mode): "nothing"`,
}}

// A folder renders as the real kustomize-controller applies it: for each
// case, what Sluice renders as the Kustomization is exactly the set of
// objects kustomize-controller applied (its inventory), and each one,
// applied as kustomize-controller applies (a server-side dry run as its
// field manager), changes nothing: no field more, none less, no value
// different.
func TestAFolderRendersAsTheRealKustomizeControllerAppliesIt(t *testing.T) {
	ctx := context.Background()
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	fluxNS := testenv.Namespace("flux")
	namespaces := map[string]string{fluxNS: fluxNS}
	sops, keys := sopsCase(t)
	fluxCases := append(slices.Clone(fluxCases), sops)
	for _, tc := range fluxCases {
		namespaces[tc.name] = testenv.Namespace(tc.name)
	}
	for _, ns := range namespaces {
		if err := c.Kube().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// The decryption Secret, as a platform team gives it to Flux.
	if err := c.Kube().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-keys", Namespace: fluxNS}, Data: keys}); err != nil {
		t.Fatal(err)
	}
	git := testenv.NewGitServer(t)
	url := git.CreateRepo(t, "fleet")
	w := testenv.NewWork(t, url)
	for _, tc := range fluxCases {
		w.Write(tc.files)
	}
	rev := "main@sha1:" + w.Commit("fleet")
	w.Push("main")
	flux := testenv.StartFlux(t, cp.Kubeconfig, fluxNS)
	docs := []string{fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: fleet, namespace: %s}\nspec: {interval: 1m, url: %s, ref: {branch: main}}\n", fluxNS, url)}
	for _, tc := range fluxCases {
		docs = append(docs, fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %s, namespace: %s}
spec:
  interval: 1m
  retryInterval: 1s
  path: ./%s
  prune: true
  targetNamespace: %s
  sourceRef: {kind: GitRepository, name: fleet}
%s`, tc.name, fluxNS, tc.name, namespaces[tc.name], tc.spec))
	}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Kube().Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range fluxCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(w.Dir, tc.name)
			if tc.fails != "" {
				msg := buildFailure(t, c, fluxNS, tc.name)
				own, err := Resolve(ctx, c, dir, "", fluxNS+"/"+tc.name)
				if err != nil {
					t.Fatal(err)
				}
				_, err = deploy.Render(ctx, dir, own.Options(render.Options{}))
				if !strings.Contains(msg, tc.fails) || err == nil || !strings.Contains(err.Error(), tc.fails) || !strings.Contains(err.Error(), "ConfigMap "+namespaces[tc.name]+"/settings (unset/cm.yaml)") {
					t.Errorf("kustomize-controller says %q\nSluice says %v\nboth should say %q (Sluice naming the object and its file)", msg, err, tc.fails)
				}
				return
			}
			ks := flux.WaitApplied(t, c.Kube(), tc.name, rev)
			own, err := Resolve(ctx, c, dir, "", fluxNS+"/"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			r, err := deploy.Render(ctx, dir, own.Options(render.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := own.Last().String(), strings.ReplaceAll(tc.report, "NS", namespaces[tc.name]); got != want {
				t.Errorf("Sluice's report %q, want %q", got, want)
			}
			// The same objects as kustomize-controller's inventory.
			var applied, rendered []string
			entries, _, _ := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
			for _, e := range entries {
				id := strings.Split(e.(map[string]any)["id"].(string), "_") // NAMESPACE_NAME_GROUP_KIND
				applied = append(applied, id[3]+"/"+id[0]+"/"+id[1])
			}
			for _, o := range r.Objects {
				ref := cluster.RefOf(o.Unstructured)
				rendered = append(rendered, ref.Kind+"/"+ref.Namespace+"/"+ref.Name)
			}
			sort.Strings(applied)
			sort.Strings(rendered)
			if strings.Join(rendered, " ") != strings.Join(applied, " ") {
				t.Fatalf("Sluice renders %v\nkustomize-controller applied %v", rendered, applied)
			}
			// Each applied as kustomize-controller would: no change.
			res, err := c.Diff(ctx, r.Objects, cluster.DiffOptions{Namespace: own.TargetNamespace(), AsApplier: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range res.Changes {
				if ch.Action != cluster.Unchanged {
					t.Errorf("%s %s as kustomize-controller applies it:\n%s", ch.Ref, ch.Action, ch.Diff)
				}
			}
		})
	}
}

// buildFailure waits until kustomize-controller reports the
// Kustomization's build failed, and returns what it says.
func buildFailure(t *testing.T, c *cluster.Client, ns, name string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(FluxKustomizationKind)
		if err := c.Kube().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Ready" && m["status"] == "False" && m["reason"] == "BuildFailed" {
				return fmt.Sprint(m["message"])
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kustomization %s/%s did not fail its build: %v", ns, name, conds)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
