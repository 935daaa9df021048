package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"filippo.io/age"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/owner"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/testenv"
)

// These tests hand clusters back to the real Flux controllers
// (source-controller, kustomize-controller, helm-controller, built from
// the Go module proxy by hack/flux/build.sh), running out of cluster
// against the test API server and pulling from a loopback git server.

// fleet is a git repository Flux deploys from: apps/ (three objects) into
// NS, and a chart.
var fleet = map[string]string{
	"apps/kustomization.yaml": "resources: [web.yaml, settings.yaml, other.yaml]\n",
	"apps/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {team: a}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/web:1.0}]
`,
	"apps/settings.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, labels: {tier: gold}}\ndata: {color: blue}\n",
	"apps/other.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {v: '1'}\n",
	"charts/web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"charts/web/values.yaml": "color: blue\n",
	"charts/web/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data: {color: {{ .Values.color | quote }}}
`,
}

// fluxFleet is the sources and Kustomization Flux runs by.
const fluxFleet = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet, namespace: FLUXNS}
spec:
  interval: 1s
  url: URL
  ref: {branch: main}
`

const fluxApps = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: FLUXNS}
spec:
  interval: 2s
  retryInterval: 1s
  path: ./apps
  prune: true
  targetNamespace: NS
  sourceRef: {kind: GitRepository, name: fleet}
`

type realFlux struct {
	t          *testing.T
	c          *cluster.Client
	ns, fluxNS string
	url        string
	work       *testenv.Work
	flux       *testenv.Flux
}

func startRealFlux(t *testing.T, files map[string]string) *realFlux {
	t.Helper()
	c := newClient(t)
	f := &realFlux{t: t, c: c, ns: testenv.Namespace("app"), fluxNS: testenv.Namespace("flux")}
	for _, n := range []string{f.ns, f.fluxNS} {
		if err := c.Kube().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	git := testenv.NewGitServer(t)
	f.url = git.CreateRepo(t, "fleet")
	f.work = testenv.NewWork(t, f.url)
	f.work.Write(f.expandAll(files)).Commit("fleet")
	f.work.Push("main")
	f.flux = testenv.StartFlux(t, cp.Kubeconfig, f.fluxNS)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Flux's logs:\n%s", f.flux.Logs(40))
		}
	})
	f.apply(fluxFleet)
	return f
}

func (f *realFlux) expand(s string) string {
	return strings.NewReplacer("FLUXNS", f.fluxNS, "NS", f.ns, "URL", f.url).Replace(s)
}

func (f *realFlux) expandAll(files map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		if strings.Contains(v, "ENC[AES256_GCM,") {
			out[k] = v // encrypted: its ciphertext and key are as they are
			continue
		}
		out[k] = f.expand(v)
	}
	return out
}

// apply applies objects as a person would with kubectl.
func (f *realFlux) apply(docs string) {
	f.t.Helper()
	applyAs(f.t, f.c, "kubectl", parse(f.t, f.ns, f.expand(docs)))
}

// push commits files to the fleet and returns the revision Flux names.
func (f *realFlux) push(files map[string]string, msg string) string {
	f.t.Helper()
	sha := f.work.Write(f.expandAll(files)).Commit(msg)
	f.work.Push("main")
	return "main@sha1:" + sha
}

func (f *realFlux) revision() string { return "main@sha1:" + f.work.Head() }

// applied waits until a Flux object (Kustomization, HelmRelease) in the
// Flux namespace has applied revision and is Ready.
func (f *realFlux) applied(apiVersion, kind, name, revision string) {
	f.t.Helper()
	f.eventually(60*time.Second, func() string {
		u := get(f.t, f.c, apiVersion, kind, f.fluxNS, name)
		if u == nil {
			return kind + " " + name + " is missing"
		}
		got, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		if kind == "HelmRelease" {
			history, _, _ := unstructured.NestedSlice(u.Object, "status", "history")
			if len(history) > 0 {
				got, _, _ = unstructured.NestedString(history[0].(map[string]any), "chartVersion")
				got = revision // a chart from git: its version, not the commit
			}
		}
		if got != revision || condition(u, "Ready") != "True" {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			return fmt.Sprintf("%s %s: applied %q (want %q), conditions %v", kind, name, got, revision, conds)
		}
		return ""
	})
}

// looked asks a Flux object (in the Flux namespace) to reconcile now and
// waits until its controller says it handled the request
// (status.lastHandledReconcileAt): what a test asserts next follows a
// look of the controller's, not a guess of how long one takes.
func (f *realFlux) looked(apiVersion, kind, name string) {
	f.t.Helper()
	v := fmt.Sprint(time.Now().UnixNano())
	u := get(f.t, f.c, apiVersion, kind, f.fluxNS, name)
	if u == nil {
		f.t.Fatalf("%s %s not found", kind, name)
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotationFluxReconcile, v))
	if err := f.c.Kube().Patch(context.Background(), u, patch); err != nil {
		f.t.Fatal(err)
	}
	f.eventually(60*time.Second, func() string {
		u := get(f.t, f.c, apiVersion, kind, f.fluxNS, name)
		if got, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt"); got != v {
			return fmt.Sprintf("%s %s has not handled the request %s (last %q)", kind, name, v, got)
		}
		return ""
	})
}

func condition(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["status"])
		}
	}
	return "Unknown"
}

// editKept checks that the session's edit of settings (color red) stays.
// A reconcile already under way when the session marked it may apply
// git's version after the session's apply: that apply is made here, as
// kustomize-controller makes it (its field manager, its labels), every
// time rather than when the timing happens to fall so, and the session
// applies its edit again within its settling window, and says so. Then,
// asked to reconcile, kustomize-controller leaves it as the session has it.
func (f *realFlux) editKept(h *harness) {
	f.t.Helper()
	red := func() string {
		got := get(f.t, f.c, "v1", "ConfigMap", f.ns, "settings")
		if got == nil {
			return "settings is gone"
		}
		if c, _, _ := unstructured.NestedString(got.Object, "data", "color"); c != "red" {
			return "settings has color " + c + ", not the session's red"
		}
		return ""
	}
	late := parse(f.t, f.ns, shop["apps/settings.yaml"])
	late[0].Unstructured.SetNamespace(f.ns)
	late[0].Unstructured.SetLabels(map[string]string{"tier": "gold", "kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": f.fluxNS})
	applyAs(f.t, f.c, "kustomize-controller", late)
	f.eventually(5*time.Second, red)
	select {
	case n := <-h.notices:
		if !strings.Contains(n, "applied ConfigMap/"+f.ns+"/settings again: a reconcile already under way") {
			f.t.Errorf("the notice: %s", n)
		}
	case <-time.After(5 * time.Second):
		f.t.Error("the session said nothing of applying settings again")
	}
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	if msg := red(); msg != "" {
		f.t.Fatalf("after a reconcile request: %s", msg)
	}
}

func (f *realFlux) eventually(timeout time.Duration, check func() string) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ownedByFlux fails unless the object's fields at path belong to manager,
// applied (server-side), and none to Sluice.
func ownedByFlux(t *testing.T, u *unstructured.Unstructured, manager string, path ...string) {
	t.Helper()
	found := false
	for _, m := range u.GetManagedFields() {
		if m.Manager == cluster.FieldManager {
			t.Errorf("%s: Sluice still owns fields: %s", cluster.RefOf(u).Subject(), m.FieldsV1.Raw)
		}
		if m.Manager != manager || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		json.Unmarshal(m.FieldsV1.Raw, &fields)
		if _, ok, _ := unstructured.NestedFieldNoCopy(fields, path...); ok && m.Operation == metav1.ManagedFieldsOperationApply {
			found = true
		}
	}
	if !found {
		var managers []string
		for _, m := range u.GetManagedFields() {
			managers = append(managers, fmt.Sprintf("%s (%s)", m.Manager, m.Operation))
		}
		t.Errorf("%s: %s is not %s's (Apply); managers: %s", cluster.RefOf(u).Subject(), strings.Join(path, "."), manager, strings.Join(managers, ", "))
	}
}

func replicas(u *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return n
}

func TestObjectPauseKeepsFluxReconcilingTheRestOfTheKustomization(t *testing.T) {
	f := startRealFlux(t, fleet)
	ctx := context.Background()
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())

	s := startSession(t, f.c, Options{Namespace: f.ns})
	dev := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {team: a}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.example.com/web:dev}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: extra}
data: {new: "yes"}
`
	if _, err := s.Apply(ctx, parse(t, f.ns, dev), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	ks := get(t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps")
	if _, found, _ := unstructured.NestedFieldNoCopy(ks.Object, "spec", "suspend"); found {
		t.Errorf("the Kustomization was suspended; only web should be paused: %v", ks.Object["spec"])
	}
	web := get(t, f.c, "apps/v1", "Deployment", f.ns, "web")
	if web.GetAnnotations()[annotationFluxDisabled] != fluxDisabled {
		t.Errorf("web is not marked for kustomize-controller to leave alone: %v", web.GetAnnotations())
	}
	if extra := get(t, f.c, "v1", "ConfigMap", f.ns, "extra"); extra.GetAnnotations()[annotationFluxDisabled] != "" {
		t.Error("a created object needs no mark (it is in no inventory)")
	}
	rec := s.Record()
	if len(rec.Owners) != 1 || rec.Owners[0].How != HowObjects || len(rec.Owners[0].Objects) != 1 || rec.Owners[0].Objects[0].Name != "web" {
		t.Fatalf("the record's pause: %+v", rec.Owners)
	}
	f.eventually(5*time.Second, func() string { // the next heartbeat publishes it
		if in, err := Get(ctx, f.c, s.Name()); err != nil || len(in.Paused) != 1 || !strings.Contains(in.Paused[0], "Kustomization/"+f.fluxNS+"/apps: 1 object(s) marked") {
			return fmt.Sprintf("run list shows: %+v (%v)", in.Paused, err)
		}
		return ""
	})

	// Meanwhile git changes another object of the Kustomization, and web.
	rev := f.push(map[string]string{
		"apps/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {v: '2'}\n",
		"apps/web.yaml":   strings.Replace(fleet["apps/web.yaml"], "replicas: 2", "replicas: 4", 1),
	}, "other v2, web 4 replicas")
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", rev)
	if v := get(t, f.c, "v1", "ConfigMap", f.ns, "other").Object["data"].(map[string]any)["v"]; v != "2" {
		t.Errorf("git's change to another object did not reach the cluster during the session: v=%v", v)
	}
	if n := replicas(get(t, f.c, "apps/v1", "Deployment", f.ns, "web")); n != 3 {
		t.Errorf("Flux reverted the session's web (replicas %d, want the session's 3)", n)
	}
	select {
	case why := <-s.Reverted():
		t.Fatalf("the pause was reported reverted: %s", why)
	default:
	}

	r, err := s.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Resumed) != 1 || len(r.Deleted) != 1 || len(r.Restored) != 1 {
		t.Errorf("restoration: %+v", r)
	}
	// Handed back: Flux applies git's web (4 replicas) and owns it again.
	f.eventually(30*time.Second, func() string {
		web := get(t, f.c, "apps/v1", "Deployment", f.ns, "web")
		if n := replicas(web); n != 4 {
			return fmt.Sprintf("web has %d replicas, want git's 4", n)
		}
		if _, marked := web.GetAnnotations()[annotationFluxDisabled]; marked {
			return "web is still marked"
		}
		return ""
	})
	web = get(t, f.c, "apps/v1", "Deployment", f.ns, "web")
	ownedByFlux(t, web, "kustomize-controller", "f:spec", "f:replicas")
	if get(t, f.c, "v1", "ConfigMap", f.ns, "extra") != nil {
		t.Error("the session's ConfigMap is still there")
	}
}

func TestAnObjectTheSessionDeletedComesBackFluxOwned(t *testing.T) {
	f := startRealFlux(t, fleet)
	ctx := context.Background()
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())

	s := startSession(t, f.c, Options{Namespace: f.ns})
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {v: dev}\n"
	settings := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, labels: {tier: gold}}\ndata: {color: green}\n"
	if _, err := s.Apply(ctx, parse(t, f.ns, other+"---\n"+settings), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// The developer removes settings from the working tree: the session
	// deletes it, which no mark keeps away, so the Kustomization is
	// suspended, and says why.
	res, err := s.Apply(ctx, parse(t, f.ns, other), cluster.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); !strings.Contains(got, "configmap/settings deleted") {
		t.Fatalf("second apply:\n%s", got)
	}
	rec := s.Record()
	if len(rec.Owners) != 1 || rec.Owners[0].How != HowSuspend || !strings.Contains(rec.Owners[0].Why, "deleted ConfigMap/"+f.ns+"/settings") {
		t.Fatalf("the pause after a deletion: %+v", rec.Owners)
	}
	ks := get(t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps")
	if v, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend"); !v {
		t.Fatalf("the Kustomization is not suspended: %v", ks.Object["spec"])
	}
	// Asked to reconcile, kustomize-controller looks, and settings is
	// still gone.
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	if get(t, f.c, "v1", "ConfigMap", f.ns, "settings") != nil {
		t.Fatal("Flux recreated the ConfigMap the session deleted")
	}

	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	back := get(t, f.c, "v1", "ConfigMap", f.ns, "settings")
	if back == nil {
		t.Fatal("settings was not recreated")
	}
	ownedByFlux(t, back, "kustomize-controller", "f:metadata", "f:labels", "f:tier")
	for _, m := range back.GetManagedFields() {
		if m.Operation == metav1.ManagedFieldsOperationUpdate && strings.Contains(m.Manager, "http-client") {
			t.Errorf("the recreated object's fields belong to %s (Update)", m.Manager)
		}
	}
	// Flux can still remove a field from it: a label dropped in git goes.
	rev := f.push(map[string]string{"apps/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {color: blue}\n"}, "settings: no tier")
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", rev)
	f.eventually(20*time.Second, func() string {
		if l := get(t, f.c, "v1", "ConfigMap", f.ns, "settings").GetLabels()["tier"]; l != "" {
			return "the label git dropped is still on the recreated object: tier=" + l
		}
		return ""
	})
}

// fleetParent is a parent Kustomization that applies clusters/ from git:
// the child Kustomization apps and the HelmRelease web, both with
// suspend: false written in git.
const fleetParent = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: fleet, namespace: FLUXNS}
spec:
  interval: 2s
  retryInterval: 1s
  path: ./clusters
  prune: true
  sourceRef: {kind: GitRepository, name: fleet}
`

var fleetClusters = map[string]string{
	"clusters/apps.yaml": strings.Replace(fluxApps, "spec:\n", "spec:\n  suspend: false\n", 1),
	"clusters/web.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: FLUXNS}
spec:
  suspend: false
  interval: 2s
  targetNamespace: NS
  releaseName: web
  chart:
    spec:
      chart: ./charts/web
      sourceRef: {kind: GitRepository, name: fleet}
      interval: 1s
      reconcileStrategy: Revision
  install: {disableWait: true}
  upgrade: {disableWait: true}
  values: {color: red}
`,
}

func withClusters() map[string]string {
	files := map[string]string{}
	for k, v := range fleet {
		files[k] = v
	}
	for k, v := range fleetClusters {
		files[k] = v
	}
	return files
}

// ready waits until a Flux object is Ready at its current generation.
func (f *realFlux) ready(apiVersion, kind, name string) *unstructured.Unstructured {
	f.t.Helper()
	var u *unstructured.Unstructured
	f.eventually(60*time.Second, func() string {
		u = get(f.t, f.c, apiVersion, kind, f.fluxNS, name)
		if u == nil {
			return kind + " " + name + " is missing"
		}
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		if condition(u, "Ready") != "True" || observed != u.GetGeneration() {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			return fmt.Sprintf("%s %s is not Ready at generation %d (observed %d): %v", kind, name, u.GetGeneration(), observed, conds)
		}
		return ""
	})
	return u
}

func suspended(u *unstructured.Unstructured) bool {
	v, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend")
	return v
}

func TestAParentKustomizationCannotUndoTheChildsSuspend(t *testing.T) {
	f := startRealFlux(t, withClusters())
	ctx := context.Background()
	f.apply(fleetParent)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "fleet", f.revision())
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())

	s := startSession(t, f.c, Options{Namespace: f.ns, Pause: PauseOwner})
	dev := strings.Replace(fleet["apps/web.yaml"], "replicas: 2", "replicas: 3", 1)
	if _, err := s.Apply(ctx, parse(t, f.ns, dev), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := s.Record()
	if len(rec.Owners) != 1 || rec.Owners[0].How != HowSuspend || rec.Owners[0].Parent == nil || rec.Owners[0].Parent.Name != "fleet" {
		t.Fatalf("the child's pause should hold against its parent: %+v", rec.Owners)
	}
	apps := get(t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps")
	if !suspended(apps) || apps.GetAnnotations()[annotationFluxDisabled] != fluxDisabled {
		t.Fatalf("apps should be suspended and marked for fleet to leave alone: %v %v", apps.Object["spec"], apps.GetAnnotations())
	}

	// git moves; the parent applies the new revision, skipping apps.
	rev := f.push(map[string]string{"apps/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {v: '2'}\n"}, "other v2")
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "fleet", rev)
	// The session says git moved for the suspended Kustomization whose
	// object it holds (its source's artifact moves while it is suspended).
	select {
	case n := <-s.Notices():
		if !strings.Contains(n, "git moved: Kustomization/"+f.fluxNS+"/apps now deploys "+rev) || !strings.Contains(n, "/web") {
			t.Errorf("the notice: %s", n)
		}
	case <-time.After(30 * time.Second):
		t.Error("no notice that git moved for the suspended Kustomization")
	}
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "fleet") // and once more
	apps = get(t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps")
	if !suspended(apps) {
		t.Fatalf("the parent put suspend: false back from git: %v", apps.Object["spec"])
	}
	if n := replicas(get(t, f.c, "apps/v1", "Deployment", f.ns, "web")); n != 3 {
		t.Errorf("web has %d replicas, want the session's 3", n)
	}
	select {
	case why := <-s.Reverted():
		t.Fatalf("the pause was reported reverted: %s", why)
	default:
	}

	// Someone takes the mark off: the parent puts git's suspend: false
	// back, and the session sees its pause gone instead of fighting Flux.
	if err := mergePatch(ctx, f.c.Kube(), apps, map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotationFluxDisabled: nil}}}, "unmarking"); err != nil {
		t.Fatal(err)
	}
	select {
	case why := <-s.Reverted():
		if !strings.Contains(why, "Kustomization/"+f.fluxNS+"/apps") {
			t.Errorf("the reversal should name the owner: %s", why)
		}
		t.Logf("reported: %s", why)
	case <-time.After(15 * time.Second):
		t.Fatal("the reverted pause was not noticed")
	}

	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	apps = f.ready("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	if v, found, _ := unstructured.NestedBool(apps.Object, "spec", "suspend"); !found || v {
		t.Errorf("apps should be back to git's suspend: false: %v", apps.Object["spec"])
	}
	for _, a := range []string{annotationFluxDisabled, annotationMarkedBy, annotationSuspendedBy, annotationPrior} {
		if _, ok := apps.GetAnnotations()[a]; ok {
			t.Errorf("apps still has %s: %v", a, apps.GetAnnotations())
		}
	}
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", rev)
	f.eventually(20*time.Second, func() string {
		if n := replicas(get(t, f.c, "apps/v1", "Deployment", f.ns, "web")); n != 2 {
			return fmt.Sprintf("web has %d replicas, want git's 2", n)
		}
		return ""
	})
	ownedByFlux(t, get(t, f.c, "apps/v1", "Deployment", f.ns, "web"), "kustomize-controller", "f:spec", "f:replicas")
}

func TestAHelmReleaseIsSuspendedAndHeldAgainstItsParent(t *testing.T) {
	f := startRealFlux(t, withClusters())
	ctx := context.Background()
	f.apply(fleetParent)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "fleet", f.revision())
	f.ready("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	cfg := get(t, f.c, "v1", "ConfigMap", f.ns, "web-config")
	if cfg == nil || cfg.GetLabels()["helm.toolkit.fluxcd.io/name"] != "web" {
		t.Fatalf("helm-controller's object: %v", cfg)
	}

	// The default pause: a HelmRelease cannot be paused by its objects.
	s := startSession(t, f.c, Options{Namespace: f.ns})
	dev := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\ndata: {color: green}\n"
	if _, err := s.Apply(ctx, parse(t, f.ns, dev), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := s.Record()
	if len(rec.Owners) != 1 || rec.Owners[0].How != HowSuspend || !strings.Contains(rec.Owners[0].Why, "Helm release") || rec.Owners[0].Parent == nil {
		t.Fatalf("the HelmRelease's pause: %+v", rec.Owners)
	}
	hr := get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.fluxNS, "web")
	if !suspended(hr) || hr.GetAnnotations()[annotationFluxDisabled] != fluxDisabled {
		t.Fatalf("the HelmRelease should be suspended and marked for fleet: %v %v", hr.Object["spec"], hr.GetAnnotations())
	}
	// The parent reconciles a new revision; the HelmRelease stays paused
	// and the session's object stays.
	rev := f.push(map[string]string{"apps/other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {v: '2'}\n"}, "other v2")
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "fleet", rev)
	// The session says git moved for the suspended HelmRelease whose
	// object it holds (its chart's artifact moves with the commit).
	select {
	case n := <-s.Notices():
		if !strings.Contains(n, "git moved: HelmRelease/"+f.fluxNS+"/web now deploys 0.1.0+"+strings.TrimPrefix(rev, "main@sha1:")[:12]) || !strings.Contains(n, "configmap/web-config") {
			t.Errorf("the notice: %s", n)
		}
	case <-time.After(30 * time.Second):
		t.Error("no notice that git moved for the suspended HelmRelease")
	}
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "fleet")
	f.looked("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	if hr = get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.fluxNS, "web"); !suspended(hr) {
		t.Fatalf("the parent resumed the HelmRelease: %v", hr.Object["spec"])
	}
	if c := get(t, f.c, "v1", "ConfigMap", f.ns, "web-config").Object["data"].(map[string]any)["color"]; c != "green" {
		t.Errorf("the session's change was undone: color %v", c)
	}

	r, err := s.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Resumed) != 1 || len(r.Restored) != 1 {
		t.Errorf("restoration: %+v", r)
	}
	hr = f.ready("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	if suspended(hr) || hr.GetAnnotations()[annotationFluxDisabled] != "" {
		t.Errorf("the HelmRelease is not handed back: %v %v", hr.Object["spec"], hr.GetAnnotations())
	}
	cfg = get(t, f.c, "v1", "ConfigMap", f.ns, "web-config")
	if c := cfg.Object["data"].(map[string]any)["color"]; c != "red" {
		t.Errorf("web-config has color %v, want the release's red", c)
	}
	for _, m := range cfg.GetManagedFields() {
		if m.Manager == cluster.FieldManager {
			t.Errorf("Sluice still owns fields of web-config: %s", m.FieldsV1.Raw)
		}
	}
}

func TestCleanupOfAKilledSessionHandsObjectsBackToFlux(t *testing.T) {
	f := startRealFlux(t, fleet)
	ctx := context.Background()
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())

	s := startSession(t, f.c, Options{Namespace: f.ns, LeaseDuration: 2 * time.Second})
	settings := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, labels: {tier: gold}}\ndata: {color: green}\n"
	web := strings.Replace(fleet["apps/web.yaml"], "replicas: 2", "replicas: 5", 1)
	if _, err := s.Apply(ctx, parse(t, f.ns, settings+"---\n"+web), cluster.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, parse(t, f.ns, web), cluster.ApplyOptions{}); err != nil { // settings deleted
		t.Fatal(err)
	}
	s.stopHeartbeat() // as if killed -9
	staleSoon(t, f.c, s.Name())
	rs, err := Cleanup(ctx, f.c, false, StopOptions{})
	if err != nil || !containsSession(rs, s.Name()) {
		t.Fatalf("cleanup: %v %+v", err, rs)
	}
	f.ready("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	back := get(t, f.c, "v1", "ConfigMap", f.ns, "settings")
	if back == nil {
		t.Fatal("settings was not recreated")
	}
	ownedByFlux(t, back, "kustomize-controller", "f:data", "f:color")
	f.eventually(20*time.Second, func() string {
		if n := replicas(get(t, f.c, "apps/v1", "Deployment", f.ns, "web")); n != 2 {
			return fmt.Sprintf("web has %d replicas, want git's 2", n)
		}
		return ""
	})
	ownedByFlux(t, get(t, f.c, "apps/v1", "Deployment", f.ns, "web"), "kustomize-controller", "f:spec", "f:replicas")
}

// shopFleet is a folder a Flux Kustomization transforms in every way it
// can: its own kustomization amended (namespace, prefix, patch, image),
// variables from a ConfigMap, a Secret and the Kustomization itself, a
// SOPS-encrypted Secret.
func shopFleet(t *testing.T, recipient string) map[string]string {
	return map[string]string{
		".sops.yaml":                    "creation_rules: [{encrypted_regex: '^(data|stringData)$', age: " + recipient + "}]\n",
		"shop/kustomization.yaml":       "resources: [web.yaml, settings.yaml, db.yaml, literal.yaml]\nimages: [{name: registry.example.com/web, newTag: '1.0'}]\n",
		"shop/literal.yaml":             "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: literal\n  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}\ndata: {v: '${cluster_name}'}\n",
		"shop/extra/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [extra.yaml]\n",
		"shop/extra/extra.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {cluster: '${cluster_name}'}\n",
		"shop/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: ${replicas:=2}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: registry.example.com/web:latest
        env: [{name: CLUSTER, value: "${cluster_name}"}]
        ports: [{containerPort: 8080}]
`,
		"shop/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data:
  domain: shop.${cluster_domain}
  region: ${region}
  tier: ${tier:=bronze}
`,
		"shop/db.yaml": testenv.SOPSEncrypt(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: s3cret}\n", recipient, "^(data|stringData)$"),
	}
}

const fluxShop = `apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-vars, namespace: FLUXNS}
data: {cluster_domain: example.org, cluster_name: eu-1}
---
apiVersion: v1
kind: Secret
metadata: {name: cluster-secrets, namespace: FLUXNS}
stringData: {region: eu-west}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop, namespace: FLUXNS}
spec:
  interval: 1m
  retryInterval: 1s
  path: ./shop
  prune: true
  targetNamespace: NS
  namePrefix: eu-
  sourceRef: {kind: GitRepository, name: fleet}
  images: [{name: registry.example.com/web, newTag: "1.1"}]
  components: [extra]
  commonMetadata: {labels: {team: shop}}
  patches:
  - target: {kind: Deployment}
    patch: |
      - op: add
        path: /metadata/annotations
        value: {patched: "yes"}
  postBuild:
    substitute: {replicas: "3"}
    substituteFrom:
    - {kind: ConfigMap, name: cluster-vars}
    - {kind: Secret, name: cluster-secrets}
    - {kind: ConfigMap, name: absent, optional: true}
  decryption: {provider: sops, secretRef: {name: sops-age}}
`

func TestARunAppliesWhatFluxAppliesSoOnlyTheEditDiffers(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	f := startRealFlux(t, shopFleet(t, id.Recipient().String()))
	// The key is created as it is: f.apply would expand NS or URL in it.
	if err := f.c.Kube().Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-age", Namespace: f.fluxNS},
		StringData: map[string]string{"age.agekey": id.String()}}); err != nil {
		t.Fatal(err)
	}
	f.apply(fluxShop)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "shop", f.revision())

	// What Flux applied, as the session will compare it: the session's
	// own marks aside.
	marks := append([]string{annotationSession, annotationFluxDisabled, "sluice.dev/applied"}, handBack...)
	snapshot := func() map[string]map[string]any {
		d, err := testenv.Dump(cp.Config, []string{f.ns}, nil, marks...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := snapshot()
	cmKey, secretKey := "/ConfigMap/"+f.ns+"/eu-settings", "/Secret/"+f.ns+"/eu-db"
	if got := before[cmKey]["data"]; !reflect.DeepEqual(got, map[string]any{"domain": "shop.example.org", "region": "eu-west", "tier": "bronze"}) {
		t.Fatalf("Flux applied the settings as %v", got)
	}
	if got := before[secretKey]["data"]; !reflect.DeepEqual(got, map[string]any{"password": base64.StdEncoding.EncodeToString([]byte("s3cret"))}) {
		t.Fatalf("Flux applied the Secret as %v", got)
	}
	if lit, extra := before["/ConfigMap/"+f.ns+"/eu-literal"]["data"], before["/ConfigMap/"+f.ns+"/eu-extra"]["data"]; !reflect.DeepEqual(lit, map[string]any{"v": "${cluster_name}"}) || !reflect.DeepEqual(extra, map[string]any{"cluster": "eu-1"}) {
		t.Fatalf("Flux applied the literal as %v, the component's as %v", lit, extra)
	}

	// What a person reads of it shows no decrypted value.
	res, _, err := owner.Render(context.Background(), f.c, filepath.Join(f.work.Dir, "shop"), "auto", render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	printed, _ := res.YAML()
	if strings.Contains(string(printed), base64.StdEncoding.EncodeToString([]byte("s3cret"))) || !strings.Contains(string(printed), base64.StdEncoding.EncodeToString([]byte(owner.Masked))) {
		t.Errorf("the printed render shows the Secret as:\n%s", printed)
	}

	// A session on an unchanged clone: found by source and path, it
	// applies nothing that differs from what Flux applied.
	h := runSession(t, f.c, RunOptions{Dir: filepath.Join(f.work.Dir, "shop")})
	st := <-h.started
	if st.Owner != "Kustomization "+f.fluxNS+"/shop" || st.Namespace != f.ns {
		t.Errorf("started as %q in %q", st.Owner, st.Namespace)
	}
	it := h.ok(t)
	want := "as Kustomization " + f.fluxNS + "/shop: targetNamespace " + f.ns + ", namePrefix eu-, 1 patch, 1 image, 1 component, commonMetadata, " +
		"2 substitutions from ConfigMap cluster-vars, 1 substitution from Secret cluster-secrets, 1 substitution from spec.postBuild.substitute, 1 Secret decrypted"
	if it.AsOwner != want {
		t.Errorf("the first iteration says\n%q\nwant\n%q", it.AsOwner, want)
	}
	sameDump(t, before, snapshot())

	// One edit changes exactly that field.
	write(t, filepath.Join(f.work.Dir, "shop"), map[string]string{"settings.yaml": strings.Replace(shopFleetSettings(t, f), "tier: ${tier:=bronze}", "tier: gold", 1)})
	if it := h.ok(t); it.AsOwner != "" {
		t.Errorf("the second iteration repeats what the owner did: %q", it.AsOwner)
	}
	edited := snapshot()
	expect := snapshot()
	for k, v := range before {
		if k != cmKey {
			expect[k] = v
		}
	}
	expect[cmKey] = deepCopy(before[cmKey])
	unstructured.SetNestedField(expect[cmKey], "gold", "data", "tier")
	sameDump(t, expect, edited)

	h.stop(t)
	f.eventually(30*time.Second, func() string {
		if after := snapshot(); !reflect.DeepEqual(after, before) {
			return fmt.Sprintf("after the stop, the namespace is not as Flux left it: settings %v", after[cmKey]["data"])
		}
		return ""
	})

	// Side by side: the owner's settings, then the namespace rewritten
	// (the Kustomization's targetNamespace included); the owner untouched.
	v := runSession(t, f.c, RunOptions{Dir: filepath.Join(f.work.Dir, "shop"), Session: Options{Name: "side", Mode: Version}})
	if it := v.ok(t); !strings.Contains(it.AsOwner, "targetNamespace "+f.ns) {
		t.Errorf("version mode: %q", it.AsOwner)
	}
	side := get(t, f.c, "v1", "ConfigMap", f.ns+"-side", "eu-settings")
	if side == nil || !reflect.DeepEqual(side.Object["data"], map[string]any{"domain": "shop.example.org", "region": "eu-west", "tier": "gold"}) {
		t.Errorf("the version's settings: %v", side)
	}
	sameDump(t, before, snapshot())
	// The namespaces differ by the edit alone.
	d, err := f.c.DiffNamespaces(context.Background(), f.ns, f.ns+"-side")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.OnlyInA)+len(d.OnlyInB) != 0 || len(d.Different) != 1 || d.Different[0].Ref.Name != "eu-settings" || !strings.Contains(d.Different[0].Diff, "+  tier: gold") {
		t.Errorf("diff --against: only in %s %v, only in the version %v, different %+v", f.ns, d.OnlyInA, d.OnlyInB, d.Different)
	}
	v.stop(t)
}

func shopFleetSettings(t *testing.T, f *realFlux) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.work.Dir, "shop", "settings.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func deepCopy(m map[string]any) map[string]any {
	return runtime.DeepCopyJSON(m)
}

// A tree whose remote is not its source's URL (a fork, a mirror) finds
// its Kustomization by the labels kustomize-controller set on what it
// applied, and applies nothing that differs.
func TestARunFindsTheKustomizationByItsLabelsOnALiveObject(t *testing.T) {
	f := startRealFlux(t, fleet)
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())
	testenv.Git(t, f.work.Dir, "remote", "set-url", "origin", "https://mirror.example.com/someone/fleet.git")
	before := f.inventoryState("apps")
	h := runSession(t, f.c, RunOptions{Dir: filepath.Join(f.work.Dir, "apps"), Session: Options{Namespace: f.ns}})
	if st := <-h.started; st.Owner != "Kustomization "+f.fluxNS+"/apps" {
		t.Errorf("started as %q", st.Owner)
	}
	it := h.ok(t)
	if it.AsOwner != "as Kustomization "+f.fluxNS+"/apps: targetNamespace "+f.ns {
		t.Errorf("the first iteration says %q", it.AsOwner)
	}
	f.renderedAllUnchanged(it, "apps")
	if d := differs(before, f.inventoryState("apps")); d != "" {
		t.Errorf("during the session: %s", d)
	}
	if rec := h.record(t, f.c); len(rec.Owners)+len(rec.Saved)+len(rec.Created) != 0 {
		t.Errorf("the session holds something: %+v", rec)
	}
	h.stop(t)
	if d := differs(before, f.inventoryState("apps")); d != "" {
		t.Errorf("after the session: %s", d)
	}
}

// A fleet of flux2-kustomize-helm-example's layout (vendored unchanged
// under testdata): the staging overlay of a HelmRelease, its
// HelmRepository and Namespace, deployed by a Kustomization with a
// targetNamespace, a patch and cluster variables. A session on the
// unchanged overlay leaves every object Flux applied as it was.
func TestARunOnAFleetOverlayAppliesWhatFluxApplied(t *testing.T) {
	const example = "testdata/flux2-kustomize-helm-example"
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(example, "apps"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(example, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f := startRealFlux(t, files)
	f.apply(`apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-vars, namespace: FLUXNS}
data: {cluster_domain: staging.example.org}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: FLUXNS}
spec:
  interval: 1h
  retryInterval: 1s
  path: ./apps/staging
  prune: true
  targetNamespace: NS
  sourceRef: {kind: GitRepository, name: fleet}
  patches:
  - target: {kind: HelmRelease, name: podinfo}
    patch: |
      - op: replace
        path: /spec/values/httpRoute/hostnames
        value: ["podinfo.${cluster_domain}"]
  postBuild:
    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]
`)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())

	before := f.inventoryState("apps")
	release := get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.ns, "podinfo")
	if hosts, _, _ := unstructured.NestedSlice(release.Object, "spec", "values", "httpRoute", "hostnames"); len(before) != 3 || !reflect.DeepEqual(hosts, []any{"podinfo.staging.example.org"}) {
		t.Fatalf("Flux applied %d objects; the release's hostnames %v", len(before), hosts)
	}

	h := runSession(t, f.c, RunOptions{Dir: filepath.Join(f.work.Dir, "apps", "staging")})
	it := h.ok(t)
	if want := "as Kustomization " + f.fluxNS + "/apps: targetNamespace " + f.ns + ", 1 patch, 1 substitution from ConfigMap cluster-vars"; it.AsOwner != want {
		t.Errorf("the first iteration says %q, want %q", it.AsOwner, want)
	}
	f.renderedAllUnchanged(it, "apps")
	if d := differs(before, f.inventoryState("apps")); d != "" {
		t.Errorf("during the session: %s", d)
	}
	h.stop(t)
	if d := differs(before, f.inventoryState("apps")); d != "" {
		t.Errorf("after the session: %s", d)
	}
}

// What source-controller leaves out of the artifact (.sourceignore files,
// the GitRepository's spec.ignore) is not in a session's render of a plain
// folder either, and what it keeps is: with patterns of its own, its
// default exclusions (.github/ here) no longer apply. A session on the
// unchanged tree changes nothing.
func TestARunLeavesOutWhatSourceControllerIgnores(t *testing.T) {
	f := startRealFlux(t, map[string]string{
		".sourceignore":         "# scratch files stay out of the artifact\n/plain/scratch.yaml\n",
		"plain/.sourceignore":   "*.draft.yaml\n",
		"plain/web.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {v: '1'}\n",
		"plain/scratch.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: scratch}\ndata: {v: '1'}\n",
		"plain/next.draft.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: draft}\ndata: {v: '1'}\n",
		"plain/local/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\ndata: {v: '1'}\n",
		"plain/.github/ci.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ci}\ndata: {v: '1'}\n",
	})
	f.apply(strings.Replace(fluxFleet, "ref: {branch: main}", "ref: {branch: main}\n  ignore: |\n    /plain/local/", 1) + `---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: plain, namespace: FLUXNS}
spec:
  interval: 1m
  path: ./plain
  prune: true
  targetNamespace: NS
  sourceRef: {kind: GitRepository, name: fleet}
`)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "plain", f.revision())
	for _, name := range []string{"scratch", "draft", "local"} {
		if get(t, f.c, "v1", "ConfigMap", f.ns, name) != nil {
			t.Fatalf("Flux applied %s, which its source ignores", name)
		}
	}
	if get(t, f.c, "v1", "ConfigMap", f.ns, "ci") == nil {
		t.Fatal("Flux left out .github/, which patterns of the source's own keep")
	}
	h := runSession(t, f.c, RunOptions{Dir: filepath.Join(f.work.Dir, "plain")})
	if st := <-h.started; st.Owner != "Kustomization "+f.fluxNS+"/plain" {
		t.Fatalf("started as %q", st.Owner)
	}
	it := h.ok(t)
	if it.Result.Changed() || it.Result.Count(cluster.Unchanged) != 2 {
		t.Errorf("a session on the unchanged tree: %s", changes(it))
	}
	for _, name := range []string{"scratch", "draft", "local"} {
		if get(t, f.c, "v1", "ConfigMap", f.ns, name) != nil {
			t.Errorf("the session created %s, which the source ignores", name)
		}
	}
	h.stop(t)
}
