package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/synckey"
)

// A chart whose Secret holds a generated password, hydrated by the
// controller: without the sync key's Secret the sync fails saying how to
// make it, and commits nothing (the controller never makes a key by
// itself); once made, the folder holds the Secret encrypted and the status
// names the template that generated values, and the hooks Flux applies
// unlike Helm. A rotated key gives a new password.
func TestTheControllerTakesTheSyncKeyFromItsSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.app.CopyChart(t, "grafana", "charts/grafana").CopyChart(t, "ingress-nginx", "charts/ingress-nginx").Commit("charts")
	e.app.Push("main")
	keyRef := types.NamespacedName{Namespace: e.ns, Name: "sync-key"}
	e.start(func(o *Options) { o.SyncKeySecret = keyRef })
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	e.apply(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: grafana}
spec:
  source: {repo: APP, ref: main, path: charts/grafana}
  render: {helm: {namespace: monitoring}}
  destination: {repo: DST, branch: env/dev, path: apps/grafana, sops: {age: [` + id.Recipient().String() + `]}}
  interval: 1h
`)
	ms := e.ready("grafana", metav1.ConditionFalse, 60*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "sluice sync-key new --secret "+keyRef.String()) {
		t.Fatalf("without the key: %q", c.Message)
	}
	if strings.Contains(e.dst("ls-tree", "-r", "--name-only", "main"), "apps/grafana") {
		t.Fatal("committed without the key")
	}
	if got := e.sync("grafana"); got == nil {
		t.Fatal("no sync")
	}
	var secrets corev1.SecretList
	if err := e.c.List(context.Background(), &secrets, client.InNamespace(e.ns)); err != nil || len(secrets.Items) != 0 {
		t.Fatalf("the controller made a Secret: %v %v", secrets.Items, err)
	}

	if _, err := synckey.Put(context.Background(), e.c, keyRef, synckey.New(), false); err != nil {
		t.Fatal(err)
	}
	e.requestReconcile(ms, "with-key")
	ms = e.ready("grafana", metav1.ConditionTrue, 60*time.Second)
	secret := e.dst("show", "env/dev:apps/grafana/secret-grafana.yaml")
	if !strings.Contains(secret, "admin-password: ENC[AES256_GCM,") {
		t.Fatalf("the Secret committed:\n%s", secret)
	}
	if len(ms.Status.Generated) == 0 || !strings.HasPrefix(ms.Status.Generated[0], "grafana/templates/") || ms.Status.Deployer != v1alpha1.DeployerFlux {
		t.Errorf("status: generated %v, deployer %q", ms.Status.Generated, ms.Status.Deployer)
	}
	first := secret

	// Rotated: a new password (and so a new encryption).
	if _, err := synckey.Put(context.Background(), e.c, keyRef, synckey.New(), false); err == nil {
		t.Fatal("a second key replaced the first without --rotate")
	}
	if _, err := synckey.Put(context.Background(), e.c, keyRef, synckey.New(), true); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, func() string {
		e.requestReconcile(e.sync("grafana"), time.Now().String())
		time.Sleep(2 * time.Second)
		if e.dst("show", "env/dev:apps/grafana/secret-grafana.yaml") == first {
			return "the rotated key left the Secret as it was"
		}
		return ""
	})

	// ingress-nginx's hooks, as Flux applies them without phases: said.
	e.apply(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: ingress}
spec:
  source: {repo: APP, ref: main, path: charts/ingress-nginx}
  render: {helm: {namespace: ingress}}
  destination: {repo: DST, branch: env/dev, path: apps/ingress}
  interval: 1h
`)
	ms = e.ready("ingress", metav1.ConditionTrue, 60*time.Second)
	c = meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	// Its seven hooks: the admission Jobs and the RBAC they run with.
	if len(ms.Status.Warnings) != 7 || !strings.Contains(c.Message, "7 of the chart's hooks are not run as Helm runs them") {
		t.Errorf("status: %q, warnings %v", c.Message, ms.Status.Warnings)
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("ingress", "HooksNotAsHelm") })
}
