package controller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"sluice.dev/sluice/internal/testenv"
)

// config/default is the whole install: applied to the API server as
// `kubectl apply -k config/default` would, its ServiceAccount's RBAC is
// all the controller needs (it runs here as that ServiceAccount, leader
// election included) and no more than it should have.
func TestInstallGrantsWhatTheControllerNeeds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	kinds, _ := install(t, e, "default")
	for kind, n := range map[string]int{"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 1} {
		if kinds[kind] != n {
			t.Errorf("config/default holds %d %s, want %d", kinds[kind], kind, n)
		}
	}

	asSA := rest.CopyConfig(cp.Config)
	asSA.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:sluice-system:sluice-controller"}
	sa, err := client.New(asSA, client.Options{Scheme: Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// What it must not do: list Secrets, touch workloads.
	if err := sa.List(ctx, &corev1.SecretList{}, client.InNamespace(e.ns)); err == nil {
		t.Error("the controller's ServiceAccount may list Secrets")
	}
	if err := sa.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: e.ns}}); err == nil {
		t.Error("the controller's ServiceAccount may create ConfigMaps")
	}

	addrs, _ := e.start(func(o *Options) {
		o.Config, o.LeaderElection, o.LeaderElectionNamespace, o.LeaderElectionID = asSA, true, "sluice-system", "sluice-"+e.shard
	})
	if err := e.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: e.ns}, StringData: map[string]string{"username": "u", "password": "p"}}); err != nil {
		t.Fatal(err)
	}
	e.apply(strings.Replace(webSync, "path: deploy/web}", "path: deploy/web, secretRef: {name: git}}", 1))
	ms := e.ready("web", metav1.ConditionTrue, 60*time.Second)
	if ms.Status.Destination.Commit != e.tip("env/dev") {
		t.Fatalf("as the ServiceAccount: %+v", ms.Status.Destination)
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "Committed") })
	// A webhook patches the annotation, as the ServiceAccount.
	e.receiver("hooks", "tok")
	if code, body := post(t, "http://"+addrs.Hook+"/hook/"+e.ns+"/hooks", `{"ref":"refs/heads/main","repository":{"clone_url":"`+e.appURL+`"}}`,
		map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "tok"}); code != 202 || !strings.Contains(body, "ManifestSync/web") {
		t.Fatalf("a Gitlab push hook as the ServiceAccount: %d %s", code, body)
	}
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
}

// install builds config/DIR as kubectl apply -k would, checks its
// Deployment, applies it, and counts its kinds.
func install(t *testing.T, e *env, dir string) (kinds map[string]int, args []string) {
	t.Helper()
	root, err := testenv.SourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "config", dir))
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	ctx := context.Background()
	kinds = map[string]int{}
	for _, res := range resMap.Resources() {
		m, err := res.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		kinds[u.GetKind()]++
		if u.GetKind() == "Deployment" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &d); err != nil {
				t.Fatal(err)
			}
			c := d.Spec.Template.Spec.Containers[0]
			args = c.Args
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
				c.LivenessProbe == nil || c.ReadinessProbe == nil || c.Resources.Limits.Memory().IsZero() || c.Args[0] != "serve" {
				t.Errorf("the Deployment's container: %+v", c)
			}
		}
		if err := e.c.Patch(ctx, u, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return kinds, args
}
