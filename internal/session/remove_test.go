package session

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// shop is an app of three objects Flux deploys from apps/, and a fourth
// its Kustomization does not prune.
var shop = map[string]string{
	"apps/kustomization.yaml": "resources: [settings.yaml, web.yaml, service.yaml, keep.yaml]\n",
	"apps/settings.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {color: blue}\n",
	"apps/web.yaml":           fleet["apps/web.yaml"],
	"apps/service.yaml": `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
`,
	"apps/keep.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  annotations: {kustomize.toolkit.fluxcd.io/prune: disabled}\ndata: {v: '1'}\n",
}

// state is the app's objects and its Kustomization as they compare
// across a session that must leave them exactly as they were: every
// object's content and managed fields (who applied which field, how and
// when), without what the API server assigns anew to a recreated object
// (uid, resource version, creation time) or what controllers report
// (status, and the status subresource's managed fields); the
// Kustomization's spec, labels and annotations but the reconcile request
// a hand-back adds.
func (f *realFlux) state() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	for _, gvk := range []string{"v1/ConfigMapList", "v1/ServiceList", "apps/v1/DeploymentList"} {
		l := &unstructured.UnstructuredList{}
		api, kind := gvk[:strings.LastIndex(gvk, "/")], gvk[strings.LastIndex(gvk, "/")+1:]
		l.SetAPIVersion(api)
		l.SetKind(kind)
		if err := f.c.Kube().List(context.Background(), l, client.InNamespace(f.ns)); err != nil {
			f.t.Fatal(err)
		}
		for i := range l.Items {
			if u := &l.Items[i]; u.GetName() != "kube-root-ca.crt" {
				out[u.GetKind()+"/"+u.GetName()] = managedContent(u)
			}
		}
	}
	ks := get(f.t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps")
	a := ks.GetAnnotations()
	for _, k := range handBack {
		delete(a, k)
	}
	if len(a) == 0 {
		a = nil
	}
	data, _ := yaml.Marshal(map[string]any{"spec": ks.Object["spec"], "labels": ks.GetLabels(), "annotations": a})
	out["Kustomization/apps"] = string(data)
	return out
}

// differs says how two states differ, or "".
func differs(before, after map[string]string) string {
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		switch b, a := before[k], after[k]; {
		case a == "":
			out = append(out, k+": gone")
		case b == "":
			out = append(out, k+": left behind:\n"+a)
		case a != b:
			out = append(out, fmt.Sprintf("%s changed:\nbefore:\n%safter:\n%s", k, b, a))
		}
	}
	return strings.Join(out, "\n")
}

// sameState waits until the app is as it was (Flux may still be
// applying what it was handed back), failing with the differences.
func (f *realFlux) sameState(before map[string]string) {
	f.t.Helper()
	f.eventually(30*time.Second, func() string { return differs(before, f.state()) })
}

func (f *realFlux) suspended() bool {
	return suspended(get(f.t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps"))
}

// stayedDeleted checks that the shop's Service, which the session
// deleted, stays deleted while its Kustomization is suspended. A
// reconcile already under way at the suspend may apply it after the
// session's delete: that apply is made here, as kustomize-controller
// makes it (its field manager, its labels), every time rather than when
// the timing happens to fall so, and the session deletes it again within
// its settling window. Then, asked to reconcile, kustomize-controller
// handles the request and leaves it away: the suspension, which the
// session set, is what keeps it so (a request to a suspended
// Kustomization applies nothing), so the Kustomization is checked
// suspended when it handled it.
func (f *realFlux) stayedDeleted() {
	f.t.Helper()
	gone := func() string {
		if f.exists("v1", "Service", "web") {
			return "Service/web is back"
		}
		return ""
	}
	late := parse(f.t, f.ns, shop["apps/service.yaml"])
	late[0].Unstructured.SetNamespace(f.ns)
	late[0].Unstructured.SetLabels(map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": f.fluxNS})
	applyAs(f.t, f.c, "kustomize-controller", late)
	f.eventually(5*time.Second, gone)
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	if f.exists("v1", "Service", "web") || !f.suspended() {
		f.t.Fatalf("after a reconcile request: Service/web there %v, Kustomization suspended %v", f.exists("v1", "Service", "web"), f.suspended())
	}
}

func (f *realFlux) exists(apiVersion, kind, name string) bool {
	return get(f.t, f.c, apiVersion, kind, f.ns, name) != nil
}

// A session removes what the working tree removes, as Flux would prune
// it, against the real Flux controllers: an object dropped from the
// kustomization is taken over and deleted, the Kustomization suspended
// (a deleted object carries no mark) and the line says why; an object
// Flux does not prune stays, and the line says so; putting the object
// back in the tree hands it back at once, recreated exactly, the
// Kustomization back to pausing only the edited object; dropped again
// and the session stopped, everything is as before the session: objects,
// managed fields and the Kustomization.
func TestASessionRemovesWhatTheTreeRemovesAsFluxWouldPruneIt(t *testing.T) {
	f := startRealFlux(t, shop)
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())
	before := f.state()
	dir := filepath.Join(f.work.Dir, "apps")
	ks := "Kustomization/" + f.fluxNS + "/apps"

	h := runSession(t, f.c, RunOptions{Dir: dir})
	<-h.started
	if it := h.ok(t); it.Result.Count(cluster.Unchanged) != 4 || it.Result.Changed() {
		t.Fatalf("an unchanged tree: %s", actions(it.Result))
	}
	write(t, dir, map[string]string{"settings.yaml": strings.Replace(shop["apps/settings.yaml"], "blue", "red", 1)})
	if it := h.ok(t); changes(it) != "configmap/settings configured" || len(it.Paused) != 1 || !strings.Contains(it.Paused[0], ks+": 1 object(s) marked") {
		t.Fatalf("one edit: %s; paused %v", changes(it), it.Paused)
	}
	f.editKept(h)

	// service.yaml and keep.yaml dropped from the kustomization, the files
	// left where they are.
	write(t, dir, map[string]string{"kustomization.yaml": "resources: [settings.yaml, web.yaml]\n"})
	it := h.ok(t)
	t.Logf("a resource dropped (taken over, Kustomization suspended, deleted): %s", it.Latency)
	if got := changes(it); got != "configmap/keep kept\nservice/web deleted" {
		t.Errorf("the service and keep dropped:\n%s", got)
	}
	for _, ch := range it.Result.Changes {
		if ch.Action == Kept && !strings.Contains(ch.Reason, "kustomize.toolkit.fluxcd.io/prune: disabled, which "+ks+" does not prune") {
			t.Errorf("why keep is kept: %q", ch.Reason)
		}
	}
	if want := ks + ": suspended (the session deleted Service/" + f.ns + "/web, which only suspending " + ks + " keeps away)"; len(it.Paused) != 1 || it.Paused[0] != want {
		t.Errorf("paused %q, want %q", it.Paused, want)
	}
	if f.exists("v1", "Service", "web") || !f.exists("v1", "ConfigMap", "keep") || !f.suspended() {
		t.Errorf("service there: %v, keep there: %v, Kustomization suspended: %v", f.exists("v1", "Service", "web"), f.exists("v1", "ConfigMap", "keep"), f.suspended())
	}
	// Asked to reconcile, kustomize-controller looks, and the Service
	// stays deleted.
	f.stayedDeleted()

	// Put back: handed back at once, exactly as it was; the Kustomization
	// resumes, settings alone held by its mark.
	write(t, dir, map[string]string{"kustomization.yaml": "resources: [settings.yaml, web.yaml, service.yaml]\n"})
	it = h.ok(t)
	t.Logf("put back (recreated with its managed fields, Kustomization back to object marks): %s", it.Latency)
	if got := changes(it); got != "service/web handed back" {
		t.Errorf("the service put back:\n%s", got)
	}
	if d := differs(map[string]string{"Service/web": before["Service/web"]}, map[string]string{"Service/web": f.state()["Service/web"]}); d != "" {
		t.Errorf("the service handed back is not as it was: %s", d)
	}
	rec := h.record(t, f.c)
	if f.suspended() || len(rec.Owners) != 1 || rec.Owners[0].How != HowObjects || len(rec.Owners[0].Objects) != 1 || rec.Owners[0].Objects[0].Name != "settings" || len(rec.Owners[0].Deleted) != 0 {
		t.Errorf("after the put-back: Kustomization suspended %v, owners %+v", f.suspended(), rec.Owners)
	}
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	if c := get(t, f.c, "v1", "ConfigMap", f.ns, "settings"); c.Object["data"].(map[string]any)["color"] != "red" {
		t.Errorf("Flux reverted the held edit once resumed: %v", c.Object["data"])
	}

	// Dropped again, then the session stops: everything as before.
	write(t, dir, map[string]string{"kustomization.yaml": "resources: [settings.yaml, web.yaml]\n"})
	if it := h.ok(t); changes(it) != "service/web deleted" || !f.suspended() || len(it.Paused) != 1 || !strings.HasPrefix(it.Paused[0], ks+": suspended (the session deleted Service/") {
		t.Errorf("dropped again: %s, suspended %v, paused %v", changes(it), f.suspended(), it.Paused)
	}
	out := h.stop(t)
	if r := out.Restoration; len(r.Restored) != 2 || len(r.Resumed) != 1 {
		t.Errorf("restoration: %+v", r)
	}
	f.sameState(before)
	ownedByFlux(t, get(t, f.c, "v1", "Service", f.ns, "web"), "kustomize-controller", "f:spec", "f:ports")
}

// A rename (a namePrefix added to the overlay) creates the new objects and
// deletes the old ones in one iteration; `git stash` puts them back, at
// once. A branch switch to a branch with fewer, more and different
// objects converges in one iteration, removals included, and checking the
// original branch out again hands everything back; after the stop the app
// and its Kustomization are as they were.
func TestASessionFollowsRenamesStashesAndBranchSwitches(t *testing.T) {
	f := startRealFlux(t, shop)
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())
	before := f.state()
	dir := filepath.Join(f.work.Dir, "apps")
	ks := "Kustomization/" + f.fluxNS + "/apps"
	// A branch with fewer (no service), more (extra) and different
	// (settings green) objects.
	testenv.Git(t, f.work.Dir, "checkout", "-q", "-b", "feature")
	f.work.Write(map[string]string{
		"apps/kustomization.yaml": "resources: [settings.yaml, web.yaml, keep.yaml, extra.yaml]\n",
		"apps/service.yaml":       "",
		"apps/settings.yaml":      strings.Replace(shop["apps/settings.yaml"], "blue", "green", 1),
		"apps/extra.yaml":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra}\ndata: {v: '1'}\n",
	}).Commit("feature: no service, an extra, settings green")
	testenv.Git(t, f.work.Dir, "checkout", "-q", "main")

	h := runSession(t, f.c, RunOptions{Dir: dir})
	<-h.started
	if it := h.ok(t); it.Result.Changed() {
		t.Fatalf("an unchanged tree: %s", actions(it.Result))
	}

	// Renamed: created under the new names, deleted under the old.
	write(t, dir, map[string]string{"kustomization.yaml": "namePrefix: v2-\n" + shop["apps/kustomization.yaml"]})
	it := h.ok(t)
	want := "configmap/keep kept\nconfigmap/settings deleted\nconfigmap/v2-keep created\nconfigmap/v2-settings created\ndeployment.apps/v2-web created\ndeployment.apps/web deleted\nservice/v2-web created\nservice/web deleted"
	t.Logf("a namePrefix added (4 created, 3 deleted, 1 kept): %s", it.Latency)
	if got := changes(it); got != want {
		t.Errorf("renamed:\n%s\nwant:\n%s", got, want)
	}
	if !f.suspended() || f.exists("v1", "ConfigMap", "settings") || !f.exists("v1", "ConfigMap", "v2-settings") {
		t.Errorf("renamed: suspended %v, settings there %v, v2-settings there %v", f.suspended(), f.exists("v1", "ConfigMap", "settings"), f.exists("v1", "ConfigMap", "v2-settings"))
	}
	if len(it.Paused) != 1 || !strings.HasPrefix(it.Paused[0], ks+": suspended (the session deleted ") {
		t.Errorf("paused: %v", it.Paused)
	}

	// git stash: the tree as committed, the cluster as before, the
	// Kustomization resumed.
	testenv.Git(t, f.work.Dir, "stash", "-q")
	it = h.ok(t)
	want = "configmap/settings handed back\nconfigmap/v2-keep deleted\nconfigmap/v2-settings deleted\ndeployment.apps/v2-web deleted\ndeployment.apps/web handed back\nservice/v2-web deleted\nservice/web handed back"
	if got := changes(it); got != want {
		t.Errorf("stashed:\n%s\nwant:\n%s", got, want)
	}
	if rec := h.record(t, f.c); f.suspended() || len(rec.Owners) != 0 || len(rec.Saved) != 0 {
		t.Errorf("stashed: suspended %v, owners %+v, saved %d", f.suspended(), rec.Owners, len(rec.Saved))
	}
	f.sameState(before)

	// A branch switch: one iteration converges, removals included.
	testenv.Git(t, f.work.Dir, "checkout", "-q", "feature")
	it = h.ok(t)
	want = "configmap/extra created\nconfigmap/settings configured\nservice/web deleted"
	t.Logf("git checkout feature (1 created, 1 configured, 1 deleted): %s", it.Latency)
	if got := changes(it); got != want || it.Branch != "feature" {
		t.Errorf("on feature (%s):\n%s\nwant:\n%s", it.Branch, got, want)
	}
	if f.exists("v1", "Service", "web") || !f.exists("v1", "ConfigMap", "extra") || !f.suspended() {
		t.Errorf("on feature: service there %v, extra there %v, suspended %v", f.exists("v1", "Service", "web"), f.exists("v1", "ConfigMap", "extra"), f.suspended())
	}
	f.stayedDeleted()

	// Back on main: everything handed back in one iteration.
	testenv.Git(t, f.work.Dir, "checkout", "-q", "main")
	it = h.ok(t)
	want = "configmap/extra deleted\nconfigmap/settings handed back\nservice/web handed back"
	t.Logf("git checkout main (1 deleted, 2 handed back): %s", it.Latency)
	if got := changes(it); got != want || it.Branch != "main" {
		t.Errorf("back on main (%s):\n%s\nwant:\n%s", it.Branch, got, want)
	}
	f.sameState(before)
	h.stop(t)
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	f.sameState(before)

	// A session started on the branch that lacks the Service: its first
	// iteration removes it, as Flux would prune it were the branch
	// deployed (what Flux applied is the baseline).
	testenv.Git(t, f.work.Dir, "checkout", "-q", "feature")
	h = runSession(t, f.c, RunOptions{Dir: dir})
	<-h.started
	it = h.ok(t)
	if got, want := changes(it), "configmap/extra created\nconfigmap/settings configured\nservice/web deleted"; got != want {
		t.Errorf("a first iteration on feature:\n%s\nwant:\n%s", got, want)
	}
	h.stop(t)
	testenv.Git(t, f.work.Dir, "checkout", "-q", "main")
	f.looked("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps")
	f.sameState(before)
}

// inventory reads what a Kustomization (in the Flux namespace) applied:
// its status.inventory, as "group/Kind/namespace/name" with each entry's
// API version.
func (f *realFlux) inventory(name string) map[string]string {
	f.t.Helper()
	ks := get(f.t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, name)
	entries, _, _ := unstructured.NestedSlice(ks.Object, "status", "inventory", "entries")
	out := map[string]string{}
	for _, e := range entries {
		m := e.(map[string]any)
		id := strings.Split(m["id"].(string), "_") // NAMESPACE_NAME_GROUP_KIND
		out[id[2]+"/"+id[3]+"/"+id[0]+"/"+id[1]] = fmt.Sprint(m["v"])
	}
	if len(out) == 0 {
		f.t.Fatalf("Kustomization %s has no inventory", name)
	}
	return out
}

// inventoryState is every object a Kustomization applied, content and
// managed fields (managedContent), and every other object of the app's
// namespace as it stands (events aside), so that what a session leaves
// outside the inventory shows too.
func (f *realFlux) inventoryState(name string) map[string]string {
	f.t.Helper()
	out := map[string]string{}
	all, err := testenv.Dump(cp.Config, []string{f.ns}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	inv := f.inventory(name)
	for key, obj := range all {
		if _, ok := inv[key]; ok || strings.HasSuffix(strings.SplitN(key, "/", 3)[1], "Event") {
			continue
		}
		data, _ := yaml.Marshal(obj)
		out[key+" (outside the inventory)"] = string(data)
	}
	for key, version := range inv {
		p := strings.Split(key, "/")
		api := version
		if p[0] != "" {
			api = p[0] + "/" + version
		}
		u := get(f.t, f.c, api, p[1], p[2], p[3])
		if u == nil {
			f.t.Fatalf("%s of the inventory is not on the cluster", key)
		}
		out[key] = managedContent(u)
	}
	return out
}

// renderedAllUnchanged fails unless an iteration rendered exactly the
// objects a Kustomization applied, and found every one live as rendered:
// an empty or partial render fails it.
func (f *realFlux) renderedAllUnchanged(it Iteration, name string) {
	f.t.Helper()
	var want, got []string
	for key := range f.inventory(name) {
		want = append(want, key+" unchanged")
	}
	for _, ch := range it.Result.Changes {
		got = append(got, fmt.Sprintf("%s/%s/%s/%s %s", ch.Ref.Group, ch.Ref.Kind, ch.Ref.Namespace, ch.Ref.Name, ch.Action))
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Errorf("the iteration's objects:\n%s\nwant what Kustomization %s applied, each unchanged:\n%s", strings.Join(got, "\n"), name, strings.Join(want, "\n"))
	}
}

// A chart whose value turns a template off, deployed by the real
// helm-controller: the session on the chart (with the HelmRelease's
// values) deletes the object the template made, the HelmRelease
// suspended (Helm upgrades a release whole); the value back hands it back
// and resumes the HelmRelease; turned off again and the session stopped,
// the objects (content and managed fields) and the HelmRelease are as
// before.
func TestASessionOnAChartRemovesWhatAValueTurnsOff(t *testing.T) {
	files := map[string]string{}
	for k, v := range fleet {
		files[k] = v
	}
	files["charts/web/values.yaml"] = "color: blue\nextra: true\n"
	files["charts/web/templates/extra.yaml"] = "{{- if .Values.extra }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-extra}\ndata: {v: '1'}\n{{- end }}\n"
	f := startRealFlux(t, files)
	f.apply(strings.Replace(fleetClusters["clusters/web.yaml"], "  suspend: false\n", "", 1))
	f.ready("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	state := func() map[string]string {
		out := map[string]string{}
		for _, name := range []string{"web-config", "web-extra"} {
			if u := get(t, f.c, "v1", "ConfigMap", f.ns, name); u != nil {
				out[name] = managedContent(u)
			}
		}
		hr := get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.fluxNS, "web")
		out["HelmRelease"] = fmt.Sprint(hr.Object["spec"])
		return out
	}
	before := state()
	if len(before) != 3 {
		t.Fatalf("helm-controller applied: %v", before)
	}
	hrSuspended := func() bool {
		return suspended(get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.fluxNS, "web"))
	}
	dir := filepath.Join(f.work.Dir, "charts", "web")

	// The namespace tells this HelmRelease from other tests' of the same
	// chart (a person would say -n too).
	h := runSession(t, f.c, RunOptions{Dir: dir, Session: Options{Namespace: f.ns}})
	if st := h.start(t); st.HelmRelease == nil || st.HelmRelease.Name != "web" {
		t.Fatalf("started with HelmRelease %v", st.HelmRelease)
	}
	if it := h.ok(t); it.Result.Changed() || it.Result.Count(cluster.Unchanged) != 2 {
		t.Fatalf("an unchanged chart: %s", actions(it.Result))
	}
	write(t, dir, map[string]string{"values.yaml": "color: blue\nextra: false\n"})
	it := h.ok(t)
	t.Logf("a template turned off (HelmRelease suspended, deleted): %s", it.Latency)
	if got := changes(it); got != "configmap/web-extra deleted" || !hrSuspended() || len(it.Paused) != 1 || !strings.HasPrefix(it.Paused[0], "HelmRelease/"+f.fluxNS+"/web: suspended") {
		t.Fatalf("extra turned off: %s; suspended %v; paused %v", got, hrSuspended(), it.Paused)
	}
	f.looked("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	f.eventually(5*time.Second, func() string {
		if f.exists("v1", "ConfigMap", "web-extra") {
			return "web-extra is back"
		}
		return ""
	})
	f.looked("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	if f.exists("v1", "ConfigMap", "web-extra") {
		t.Fatal("helm-controller brought back the object the session deleted")
	}

	write(t, dir, map[string]string{"values.yaml": "color: blue\nextra: true\n"})
	if it := h.ok(t); changes(it) != "configmap/web-extra handed back" || hrSuspended() {
		t.Errorf("extra turned on again: %s; suspended %v", changes(it), hrSuspended())
	}
	if d := differs(before, state()); d != "" {
		t.Errorf("after the hand-back: %s", d)
	}

	write(t, dir, map[string]string{"values.yaml": "color: blue\nextra: false\n"})
	if it := h.ok(t); changes(it) != "configmap/web-extra deleted" || !hrSuspended() {
		t.Errorf("turned off again: %s; suspended %v", changes(it), hrSuspended())
	}
	h.stop(t)
	f.ready("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
	f.eventually(30*time.Second, func() string { return differs(before, state()) })
}

// What its owner would not prune, a session keeps, and says why; the real
// controllers, handed the same removal in git afterwards, keep it too: a
// Kustomization with prune: false (Flux), and a chart's object marked
// helm.sh/resource-policy: keep (helm-controller, which upgrades without
// deleting it). Nothing is suspended for them.
func TestWhatItsOwnerWouldNotPruneIsKeptAsTheControllersKeepIt(t *testing.T) {
	t.Run("Kustomization prune false", func(t *testing.T) {
		f := startRealFlux(t, shop)
		f.apply(strings.Replace(fluxApps, "prune: true", "prune: false", 1))
		f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())
		dir := filepath.Join(f.work.Dir, "apps")
		ks := "Kustomization/" + f.fluxNS + "/apps"
		h := runSession(t, f.c, RunOptions{Dir: dir})
		<-h.started
		h.ok(t)
		write(t, dir, map[string]string{"kustomization.yaml": "resources: [settings.yaml, web.yaml, keep.yaml]\n"})
		it := h.ok(t)
		if got := changes(it); got != "service/web kept" {
			t.Fatalf("the service dropped under prune: false:\n%s", got)
		}
		if ch := it.Result.Changes; !slices.ContainsFunc(ch, func(c cluster.Change) bool {
			return c.Action == Kept && c.Reason == ks+" has prune: false"
		}) {
			t.Errorf("why the service is kept: %+v", ch)
		}
		if !f.exists("v1", "Service", "web") || f.suspended() || len(it.Paused) != 0 {
			t.Errorf("service there %v, Kustomization suspended %v, paused %v", f.exists("v1", "Service", "web"), f.suspended(), it.Paused)
		}
		h.stop(t)
		// The same removal in git: kustomize-controller applies the new
		// revision and leaves the Service, as the session did.
		testenv.Git(t, f.work.Dir, "add", "-A")
		testenv.Git(t, f.work.Dir, "commit", "-q", "-m", "drop the service")
		f.work.Push("main")
		f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())
		if !f.exists("v1", "Service", "web") {
			t.Error("kustomize-controller pruned the Service under prune: false: the session kept what Flux does not")
		}
	})

	t.Run("helm.sh/resource-policy keep", func(t *testing.T) {
		files := map[string]string{}
		for k, v := range fleet {
			files[k] = v
		}
		files["charts/web/values.yaml"] = "color: blue\nextra: true\n"
		files["charts/web/templates/extra.yaml"] = "{{- if .Values.extra }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n  annotations: {helm.sh/resource-policy: keep}\ndata: {v: '1'}\n{{- end }}\n"
		f := startRealFlux(t, files)
		f.apply(strings.Replace(fleetClusters["clusters/web.yaml"], "  suspend: false\n", "", 1))
		f.ready("helm.toolkit.fluxcd.io/v2", "HelmRelease", "web")
		if !f.exists("v1", "ConfigMap", "web-extra") {
			t.Fatal("helm-controller did not install web-extra")
		}
		dir := filepath.Join(f.work.Dir, "charts", "web")
		h := runSession(t, f.c, RunOptions{Dir: dir, Session: Options{Namespace: f.ns}})
		h.start(t)
		h.ok(t)
		write(t, dir, map[string]string{"values.yaml": "color: blue\nextra: false\n"})
		it := h.ok(t)
		if got := changes(it); got != "configmap/web-extra kept" {
			t.Fatalf("a kept template turned off:\n%s", got)
		}
		if ch := it.Result.Changes; !slices.ContainsFunc(ch, func(c cluster.Change) bool {
			return c.Action == Kept && strings.Contains(c.Reason, "marked helm.sh/resource-policy: keep, which Helm does not delete")
		}) {
			t.Errorf("why web-extra is kept: %+v", ch)
		}
		hr := get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.fluxNS, "web")
		if suspended(hr) || len(it.Paused) != 0 || !f.exists("v1", "ConfigMap", "web-extra") {
			t.Errorf("HelmRelease suspended %v, paused %v, web-extra there %v", suspended(hr), it.Paused, f.exists("v1", "ConfigMap", "web-extra"))
		}
		h.stop(t)
		// The same value in git: helm-controller upgrades the release
		// without the template and leaves the object, as the session did.
		testenv.Git(t, f.work.Dir, "add", "-A")
		testenv.Git(t, f.work.Dir, "commit", "-q", "-m", "extra off")
		f.work.Push("main")
		head := f.work.Head()[:12]
		f.eventually(90*time.Second, func() string {
			hr := get(t, f.c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", f.fluxNS, "web")
			rev, _, _ := unstructured.NestedString(hr.Object, "status", "lastAttemptedRevision")
			if !strings.Contains(rev, head) || condition(hr, "Ready") != "True" {
				return fmt.Sprintf("HelmRelease at %q, Ready %s; want the chart of %s", rev, condition(hr, "Ready"), head)
			}
			return ""
		})
		if !f.exists("v1", "ConfigMap", "web-extra") {
			t.Error("helm-controller deleted web-extra: the session kept what Helm does not")
		}
	})
}

// An object of a Helm release no GitOps object owns (`helm install`ed)
// marked helm.sh/resource-policy: keep is kept, naming the release; one
// without the mark, or marked keep with no release, is not.
func TestAHelmKeptObjectWithoutAnOwnerIsKept(t *testing.T) {
	obj := func(annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName("web-extra")
		u.SetAnnotations(annotations)
		return u
	}
	for _, tc := range []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{annotationHelmPolicy: "keep", annotationHelmRelease: "web"}, "marked helm.sh/resource-policy: keep, which Helm does not delete (release web)"},
		{map[string]string{annotationHelmRelease: "web"}, ""},
		{map[string]string{annotationHelmPolicy: "keep"}, ""},
	} {
		if got := unpruned(obj(tc.annotations), nil, &Record{}, false); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.annotations, got, tc.want)
		}
	}
}
