package session

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// fluxWorkload is what a Flux Kustomization "apps" (in %[2]s) applied
// into %[1]s.
const fluxWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: %[2]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:1.0
        env: [{name: MODE, value: prod}, {name: DEBUG, value: "0"}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
  labels: {kustomize.toolkit.fluxcd.io/name: apps, kustomize.toolkit.fluxcd.io/namespace: %[2]s}
data: {color: blue}
`

const fluxOwner = `apiVersion: v1
kind: Namespace
metadata: {name: %[2]s}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: %[2]s}
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`

// devTree is the developer's working tree: web changed (an env var
// dropped), settings changed, a ConfigMap added.
const devTree = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:dev
        env: [{name: MODE, value: dev}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: green}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: extra}
data: {new: "yes"}
`

func fluxSetup(t *testing.T, c *cluster.Client) (ns, fluxNS string) {
	t.Helper()
	ns, fluxNS = testenv.Namespace("app"), testenv.Namespace("flux")
	sub := func(s string) string { return strings.ReplaceAll(s, "%[2]s", fluxNS) }
	applyAs(t, c, "kubectl", parse(t, ns, sub(fluxOwner)))
	applyAs(t, c, "kustomize-controller", parse(t, ns, sub(fluxWorkload)))
	return ns, fluxNS
}

func TestOwnerPauseSuspendsFluxAndPutsEverythingBack(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns, fluxNS := fluxSetup(t, c)
	before := dump(t, []string{ns, fluxNS})

	s := startSession(t, c, Options{Namespace: ns, Path: "deploy/dev", Pause: PauseOwner})
	res, err := s.Apply(ctx, parse(t, ns, devTree), cluster.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); got != "configmap/extra created\nconfigmap/settings configured\ndeployment.apps/web configured" {
		t.Errorf("first apply:\n%s", got)
	}
	ks := get(t, c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", fluxNS, "apps")
	if v, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend"); !v {
		t.Errorf("the owning Kustomization is not suspended: %v", ks.Object["spec"])
	}
	web := get(t, c, "apps/v1", "Deployment", ns, "web")
	containers, _, _ := unstructured.NestedSlice(web.Object, "spec", "template", "spec", "containers")
	env := containers[0].(map[string]any)["env"].([]any)
	if len(env) != 1 || containers[0].(map[string]any)["image"] != "registry.example.com/web:dev" {
		t.Errorf("the working tree's Deployment is not what runs (Flux's env var should be gone): %v", containers)
	}
	rec := s.Record()
	if len(rec.Saved) != 2 || len(rec.Created) != 1 || len(rec.Owners) != 1 || string(rec.Owners[0].Prior) != "null" {
		t.Errorf("record: saved %d created %v owners %+v", len(rec.Saved), rec.Created, rec.Owners)
	}

	// The developer deletes the extra ConfigMap and edits settings again.
	res, err = s.Apply(ctx, parse(t, ns, strings.Split(devTree, "\n---\n")[0]+"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {color: red}\n"), cluster.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); got != "configmap/extra deleted\nconfigmap/settings configured\ndeployment.apps/web unchanged" {
		t.Errorf("second apply:\n%s", got)
	}

	r, err := s.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Restored) != 2 || len(r.Resumed) != 1 {
		t.Errorf("restoration: %+v", r)
	}
	sameDump(t, before, dump(t, []string{ns, fluxNS}))
	ks = get(t, c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", fluxNS, "apps")
	if _, found, _ := unstructured.NestedFieldNoCopy(ks.Object, "spec", "suspend"); found {
		t.Errorf("spec.suspend should be unset again, as before: %v", ks.Object["spec"])
	}
	if ks.GetAnnotations()[annotationFluxReconcile] == "" {
		t.Error("Flux was not asked to reconcile")
	}
	// Flux owns its fields again: its next apply finds them its own.
	web = get(t, c, "apps/v1", "Deployment", ns, "web")
	for _, m := range web.GetManagedFields() {
		if m.Manager == cluster.FieldManager {
			t.Errorf("sluice still owns fields of web: %+v", web.GetManagedFields())
		}
	}
	if infos, _ := List(ctx, c); len(infos) != 0 {
		for _, in := range infos {
			if in.Name == s.Name() {
				t.Errorf("the session is still listed: %+v", in)
			}
		}
	}
}

func TestConcurrentSessionsRefuseEachOthersObjectsUnlessStolen(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns := testenv.Namespace("two")
	applyAs(t, c, "kubectl", parse(t, ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: %[1]s}\ndata: {v: original}\n"))
	before := dump(t, []string{ns})

	alice := startSession(t, c, Options{Namespace: ns, Holder: "alice@laptop"})
	if _, err := alice.Apply(ctx, parse(t, ns, cm("shared", "v: alice")+"---\n"+cm("alices", "v: '1'")), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// Bob's own objects are fine; alice's are not.
	bob := startSession(t, c, Options{Namespace: ns, Holder: "bob@desk"})
	if _, err := bob.Apply(ctx, parse(t, ns, cm("bobs", "v: '1'")), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := bob.Apply(ctx, parse(t, ns, cm("bobs", "v: '1'")+"---\n"+cm("shared", "v: bob")), cluster.ApplyOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "ConfigMap/"+ns+"/shared") || !strings.Contains(err.Error(), "session "+alice.Name()+" (alice@laptop pid ") {
		t.Fatalf("conflict: %v", err)
	}
	if v := get(t, c, "v1", "ConfigMap", ns, "shared").Object["data"]; !reflect.DeepEqual(v, map[string]any{"v": "alice"}) {
		t.Errorf("a refused apply changed shared: %v", v)
	}
	if get(t, c, "v1", "ConfigMap", ns, "bobs") == nil {
		t.Error("bob's own object went with the refused apply")
	}

	// Bob steals it.
	steal := startSession(t, c, Options{Namespace: ns, Holder: "bob@desk", Steal: true})
	if _, err := steal.Apply(ctx, parse(t, ns, cm("shared", "v: bob")), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// Alice stops: shared is bob's now, so it stays as he has it.
	r, err := alice.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0], "held by session "+steal.Name()) {
		t.Errorf("alice's restoration: %+v", r)
	}
	if v := get(t, c, "v1", "ConfigMap", ns, "shared").Object["data"]; !reflect.DeepEqual(v, map[string]any{"v": "bob"}) {
		t.Errorf("alice's stop undid bob's shared: %v", v)
	}
	// Bob stops: shared is back as it was before either.
	for _, s := range []*Session{steal, bob} {
		if _, err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sameDump(t, before, dump(t, []string{ns}))
}

func TestSessionsSharingAnOwnerResumeItWhenTheLastEnds(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns, fluxNS := fluxSetup(t, c)
	before := dump(t, []string{ns, fluxNS})
	a := startSession(t, c, Options{Namespace: ns, Pause: PauseOwner})
	b := startSession(t, c, Options{Namespace: ns, Pause: PauseOwner})
	if _, err := a.Apply(ctx, parse(t, ns, cm("settings", "color: a")), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, parse(t, ns, strings.Split(devTree, "\n---\n")[0]), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	ks := get(t, c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", fluxNS, "apps")
	if v, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend"); !v || ks.GetAnnotations()[annotationSuspendedBy] != b.Name() {
		t.Fatalf("after the first session ended, the owner must stay suspended for the other: %v %v", ks.Object["spec"], ks.GetAnnotations())
	}
	if _, err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sameDump(t, before, dump(t, []string{ns, fluxNS}))
}

func TestArgoCDApplicationsLoseAutomatedSyncForTheSession(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	// The Application is named after its namespace: a second run
	// (-count=2) must not find two of the same name in two namespaces
	// with no installation ID to tell them apart.
	ns, argoNS := testenv.Namespace("argoapp"), testenv.Namespace("argocd")
	applyAs(t, c, "kubectl", parse(t, ns, `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Namespace
metadata: {name: `+argoNS+`}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: %[1]s, namespace: `+argoNS+`}
spec:
  project: default
  source: {repoURL: https://git.example.com/gitops.git, path: guestbook, targetRevision: main}
  destination: {server: https://kubernetes.default.svc, namespace: %[1]s}
  syncPolicy:
    automated: {prune: true, selfHeal: true}
    syncOptions: [CreateNamespace=true]
`))
	applyAs(t, c, "argocd-controller", parse(t, ns, `apiVersion: v1
kind: ConfigMap
metadata:
  name: guestbook
  namespace: %[1]s
  labels: {argocd.argoproj.io/instance: %[1]s}
data: {title: Guestbook}
`))
	before := dump(t, []string{ns, argoNS})
	s := startSession(t, c, Options{Namespace: ns})
	if _, err := s.Apply(ctx, parse(t, ns, cm("guestbook", "title: Dev Guestbook")), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	app := get(t, c, "argoproj.io/v1alpha1", "Application", argoNS, ns)
	sp, _, _ := unstructured.NestedMap(app.Object, "spec", "syncPolicy")
	if _, auto := sp["automated"]; auto || sp["syncOptions"] == nil {
		t.Fatalf("automated sync should be off, the rest of syncPolicy kept: %v", sp)
	}
	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sameDump(t, before, dump(t, []string{ns, argoNS}))
	app = get(t, c, "argoproj.io/v1alpha1", "Application", argoNS, ns)
	if app.GetAnnotations()[annotationArgoRefresh] != "normal" {
		t.Error("Argo CD was not asked to refresh")
	}
}

func TestLargeRecordsSpreadOverSecrets(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	defer func(n int) { partSize = n }(partSize)
	partSize = 4 << 10
	st := &store{c: c.Kube(), name: "chunky" + strings.ReplaceAll(testenv.Namespace(""), "-", "")}
	if err := ensureSystemNamespace(ctx, c.Kube()); err != nil {
		t.Fatal(err)
	}
	rec := &Record{Name: st.name}
	for i := 0; i < 300; i++ {
		// Incompressible enough to need several parts.
		rec.Saved = append(rec.Saved, Saved{Ref: cluster.Ref{Version: "v1", Kind: "ConfigMap", Namespace: "x", Name: fmt.Sprintf("cm-%d-%x", i, sha256.Sum256([]byte{byte(i)}))}, Object: json.RawMessage(`{}`)})
	}
	if err := st.write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if st.parts < 2 {
		t.Fatalf("parts = %d", st.parts)
	}
	got, err := (&store{c: c.Kube(), name: st.name}).read(ctx)
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("read back: %v (%d saved)", err, len(got.Saved))
	}
	// Shrunk, the record fits its index again: the parts go.
	rec.Saved = rec.Saved[:1]
	if err := st.write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var list corev1.SecretList
	c.Kube().List(ctx, &list, client.InNamespace(SystemNamespace), client.MatchingLabels{labelSession: st.name})
	if len(list.Items) != 1 {
		t.Errorf("%d Secrets left, want the index alone", len(list.Items))
	}
	if err := st.remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.read(ctx); !errors.Is(err, ErrNoRecord) {
		t.Errorf("after remove: %v", err)
	}
}

func TestStopFromAnotherProcessAndCleanupOfStaleSessions(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns := testenv.Namespace("stop")
	mkNamespace(t, c, ns)
	before := dump(t, []string{ns})

	// A live session is asked to stop; it restores itself.
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.yaml": cm("a", "v: '1'")})
	h := runSession(t, c, RunOptions{Dir: dir, Session: Options{Namespace: ns}})
	h.ok(t)
	name := (<-h.started).Name
	r, err := StopSession(ctx, c, name, StopOptions{Holder: "ops@console"})
	if err != nil {
		t.Fatal(err)
	}
	// The stopper hears what the session put back.
	if !r.BySession || len(r.Deleted) != 1 || r.Deleted[0].Name != "a" {
		t.Errorf("sluice run stop reports %+v, want the ConfigMap the session deleted", r)
	}
	<-h.done
	if h.err != nil || h.out.Reason != "stop requested by ops@console" || len(h.out.Restoration.Deleted) != 1 {
		t.Fatalf("run ended with %v, %+v", h.err, h.out)
	}
	sameDump(t, before, dump(t, []string{ns}))

	// A session whose process stopped heartbeating goes stale, and cleanup
	// restores it from its record.
	s := startSession(t, c, Options{Namespace: ns, LeaseDuration: 2 * time.Second})
	if _, err := s.Apply(ctx, parse(t, ns, cm("b", "v: '1'")), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	s.stopHeartbeat() // as if killed
	if rs, err := Cleanup(ctx, c, false, StopOptions{}); err != nil || len(rs) != 0 && containsSession(rs, s.Name()) {
		t.Fatalf("cleanup restored a live session: %v %+v", err, rs)
	}
	staleSoon(t, c, s.Name())
	rs, err := Cleanup(ctx, c, false, StopOptions{})
	if err != nil || !containsSession(rs, s.Name()) {
		t.Fatalf("cleanup: %v %+v", err, rs)
	}
	sameDump(t, before, dump(t, []string{ns}))
	if _, err := Get(ctx, c, s.Name()); !errors.Is(err, ErrNoSession) {
		t.Errorf("the session is still there: %v", err)
	}
	// Running it again finds nothing left to do.
	if rs, err := Cleanup(ctx, c, false, StopOptions{}); err != nil || containsSession(rs, s.Name()) {
		t.Errorf("second cleanup: %v %+v", err, rs)
	}
}

func containsSession(rs []*Restoration, name string) bool {
	for _, r := range rs {
		if r.Session == name {
			return true
		}
	}
	return false
}

func TestRestoreIsIdempotent(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns, fluxNS := fluxSetup(t, c)
	before := dump(t, []string{ns, fluxNS})
	s := startSession(t, c, Options{Namespace: ns})
	if _, err := s.Apply(ctx, parse(t, ns, devTree), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := s.Record()
	// Restored twice over (an interrupted restore run again), and a third
	// time by the session's own stop: the same end state.
	for i := 0; i < 2; i++ {
		if _, err := restore(ctx, c, &rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sameDump(t, before, dump(t, []string{ns, fluxNS}))
}

// TestTheLastSessionRemovesTheNamespaceItCreated: sluice-system, created by
// a session, goes with the last session out, unless something else lives
// there; a namespace an administrator made stays (as in every other test).
func TestTheLastSessionRemovesTheNamespaceItCreated(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns := testenv.Namespace("sysns")
	mkNamespace(t, c, ns)
	system := func() *corev1.Namespace {
		n := &corev1.Namespace{}
		if err := c.Kube().Get(ctx, client.ObjectKey{Name: SystemNamespace}, n); err != nil {
			return nil
		}
		return n
	}
	gone := func(why string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for system() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("%s: namespace %s is still there: %+v", why, SystemNamespace, system().Status)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Start from no namespace (the package's administrator-made one goes),
	// and give the next tests theirs back.
	if err := c.Kube().Delete(ctx, system()); err != nil {
		t.Fatal(err)
	}
	gone("deleting the test's own")
	t.Cleanup(func() {
		gone("before giving it back")
		if err := c.Kube().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}); err != nil {
			t.Error(err)
		}
	})

	// Two sessions: the namespace stays until the last one ends.
	a := startSession(t, c, Options{Namespace: ns})
	b := startSession(t, c, Options{Namespace: ns})
	if n := system(); n == nil || n.Labels[labelManagedBy] != "sluice" {
		t.Fatalf("the sessions' namespace: %+v", n)
	}
	for _, s := range []*Session{a, b} {
		if _, err := s.Apply(ctx, parse(t, ns, cm("c-"+s.Name(), "v: '1'")), cluster.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := system(); n == nil || n.DeletionTimestamp != nil {
		t.Fatalf("removed while session %s runs: %+v", b.Name(), n)
	}
	if _, err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	gone("after the last session")

	// Something else lives there: it stays.
	s := startSession(t, c, Options{Namespace: ns})
	keep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: SystemNamespace}}
	if err := c.Kube().Create(ctx, keep); err != nil {
		t.Fatal(err)
	}
	// Stop decides whether the namespace goes before it returns.
	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := system(); n == nil || n.DeletionTimestamp != nil {
		t.Fatalf("removed with someone else's ConfigMap in it: %+v", n)
	}
	if err := c.Kube().Delete(ctx, keep); err != nil {
		t.Fatal(err)
	}
	// A session starting while it is being removed waits, and creates it
	// again.
	if err := c.Kube().Delete(ctx, system()); err != nil {
		t.Fatal(err)
	}
	s = startSession(t, c, Options{Namespace: ns})
	if n := system(); n == nil || n.DeletionTimestamp != nil {
		t.Fatalf("the session started in a terminating namespace: %+v", n)
	}
	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
