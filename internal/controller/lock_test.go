package controller

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/takeover"
)

// A developer's `sluice takeover` from a laptop, against the folder the
// controller writes: the controller leaves it alone while the lock holds
// (status and an Event say whose, until when), and writes the folder back
// when it expires, on time, with no command.
func TestTakeoverLockIsRespectedAndExpiresOnTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.apply(webSync)
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	mainContent := e.dst("show", "env/dev:apps/web/deployment-web.yaml")

	// The developer's branch, taken over from the laptop for a few
	// seconds, with the very ManifestSync as a file.
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: feature}\n"}).Commit("feature")
	e.app.Push("main:feature")
	file := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(file, []byte(e.expand(webSync, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := source.NewCache(t.TempDir())
	reg := registry.New()
	lock := 6 * time.Second
	rep, err := takeover.Take(context.Background(), takeover.Options{
		Paths: []string{file}, Overrides: []string{e.appURL + "=" + e.appURL + "?ref=feature"}, For: lock, Owner: "alice@laptop",
		Cache: cache, Builder: &build.Builder{Cache: cache, Registry: reg}, Hydrate: hydrate.Options{Cache: cache, Registry: reg},
	})
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("takeover: %v (%+v)", err, rep.Syncs)
	}
	taken := time.Now()
	if e.dst("show", "env/dev:apps/web/configmap-feature.yaml") == "" {
		t.Fatal("the takeover did not write the feature branch")
	}
	tip := e.tip("env/dev")

	// The controller, asked to reconcile, sees the lock and keeps off.
	e.requestReconcile(e.sync("web"), "after-takeover")
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if c.Reason != v1alpha1.ReasonLocked || !strings.Contains(c.Message, "alice@laptop") || ms.Status.Lock == nil || ms.Status.Lock.Owner != "alice@laptop" {
		t.Fatalf("locked: Ready %s %q, lock %+v", c.Reason, c.Message, ms.Status.Lock)
	}
	if e.tip("env/dev") != tip {
		t.Fatal("the controller wrote a locked folder")
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "Locked") })

	// Nobody runs anything: the lock expires and the controller writes
	// main back within a few seconds of the expiry.
	e.eventually(lock+20*time.Second, func() string {
		if e.dst("show", "env/dev:apps/web/configmap-feature.yaml") != "" {
			return "the feature's folder is still there"
		}
		return ""
	})
	if late := time.Since(taken) - lock; late > 10*time.Second {
		t.Errorf("written back %s after the lock expired", late)
	}
	if got := e.dst("show", "env/dev:apps/web/deployment-web.yaml"); got != mainContent {
		t.Errorf("written back:\n%s\nwant:\n%s", got, mainContent)
	}
	ms = e.ready("web", metav1.ConditionTrue, 10*time.Second)
	if ms.Status.Lock != nil {
		t.Errorf("the status still shows the lock: %+v", ms.Status.Lock)
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "Unlocked") })
}

// A deleted sync leaves its folder as it is, unless spec.prune asks to
// remove it; a sync with prune holds a finalizer until the folder is gone.
func TestDeletedSyncLeavesOrPrunesItsFolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	ctx := context.Background()
	e.apply(webSync)
	e.apply(strings.NewReplacer("name: web", "name: api", "deploy/web", "deploy/api", "apps/web", "apps/api").Replace(webSync) + "  prune: true\n")
	e.ready("web", metav1.ConditionTrue, 30*time.Second)
	ms := e.ready("api", metav1.ConditionTrue, 30*time.Second)
	if !containsString(ms.Finalizers, pruneFinalizer) {
		t.Fatalf("a sync with prune has finalizers %v", ms.Finalizers)
	}
	if err := e.c.Delete(ctx, e.sync("web")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, func() string {
		for _, n := range []string{"web", "api"} {
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: n}, &v1alpha1.ManifestSync{}); err == nil {
				return n + " is not deleted yet"
			}
		}
		return ""
	})
	tree := e.dst("ls-tree", "-r", "--name-only", "env/dev")
	if !strings.Contains(tree, "apps/web/") {
		t.Errorf("the folder of a sync without prune was removed:\n%s", tree)
	}
	if strings.Contains(tree, "apps/api/") {
		t.Errorf("the folder of a sync with prune is still there:\n%s", tree)
	}
	if msg := e.dst("log", "-1", "--format=%s", "env/dev"); !strings.Contains(msg, "remove apps/api") {
		t.Errorf("the last commit is %q", msg)
	}
}

// Private repositories: the credentials come from the Secret the sync
// names, in its namespace; without it, or with a wrong one, the sync
// fails saying so, and the token is never in its status or Events.
func TestSecretsOfTheSyncsNamespace(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, "bot", "t0ken-value")
	e.start()
	ctx := context.Background()
	e.apply(webSync)
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonFailed || !strings.Contains(c.Message, "authentication") {
		t.Fatalf("without credentials: %s %q", c.Reason, c.Message)
	}
	for name, pw := range map[string]string{"wrong": "not-it", "right": "t0ken-value"} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, StringData: map[string]string{"username": "bot", "password": pw}}
		if err := e.c.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	withSecret := func(name string) string {
		return strings.NewReplacer("path: deploy/web}", "path: deploy/web, secretRef: {name: "+name+"}}",
			"path: apps/web}", "path: apps/web, secretRef: {name: "+name+"}}").Replace(webSync)
	}
	e.apply(withSecret("wrong"))
	ms = e.ready("web", metav1.ConditionFalse, 30*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonFailed || strings.Contains(c.Message, "not-it") {
		t.Fatalf("a wrong Secret: %s %q", c.Reason, c.Message)
	}
	e.apply(withSecret("right"))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if ms.Status.Destination.Commit != e.tip("env/dev") {
		t.Fatalf("with the Secret: %+v", ms.Status.Destination)
	}
	e.apply(withSecret("missing"))
	ms = e.ready("web", metav1.ConditionFalse, 30*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "Secret "+e.ns+"/missing") {
		t.Fatalf("a missing Secret: %q", c.Message)
	}
	var list corev1.EventList
	if err := e.c.List(ctx, &list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range list.Items {
		if strings.Contains(ev.Message, "t0ken") || strings.Contains(ev.Message, "not-it") {
			t.Errorf("an Event holds a password: %q", ev.Message)
		}
	}
	if strings.Contains(e.logs.tail(100000), "t0ken") {
		t.Error("the logs hold the token")
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
