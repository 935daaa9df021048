package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// teammatePush commits files to the fleet from another clone, as a
// teammate would while the developer's session runs on theirs; it
// returns the revision Flux names.
func (f *realFlux) teammatePush(files map[string]string, msg string) string {
	f.t.Helper()
	dir := f.t.TempDir()
	testenv.Git(f.t, dir, "clone", "-q", f.url, ".")
	for name, content := range f.expandAll(files) {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte(content), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	testenv.Git(f.t, dir, "add", "-A")
	testenv.Git(f.t, dir, "-c", "user.name=teammate", "-c", "user.email=teammate@example.com", "commit", "-q", "-m", msg)
	testenv.Git(f.t, dir, "push", "-q", "origin", "HEAD:main")
	return "main@sha1:" + strings.TrimSpace(testenv.Git(f.t, dir, "rev-parse", "HEAD"))
}

// A session takes over only the objects the working tree changes, against
// the real Flux controllers: on an unchanged clone nothing at all; with
// one edit that object alone, the Kustomization reconciling the rest from
// git (a teammate's commit reaches the cluster during the session, and
// the session says git moved for the object it holds); a save that undoes
// the edit hands the object back at once; after the stop the edited
// object is git's and kustomize-controller's again, with no mark left.
func TestASessionTakesOverOnlyWhatTheTreeChanges(t *testing.T) {
	f := startRealFlux(t, fleet)
	f.apply(fluxApps)
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", f.revision())
	dir := filepath.Join(f.work.Dir, "apps")
	marked := func(kind, name string) bool {
		api := "v1"
		if kind == "Deployment" {
			api = "apps/v1"
		}
		a := get(t, f.c, api, kind, f.ns, name).GetAnnotations()
		return a[annotationFluxDisabled] != "" || a[annotationSession] != ""
	}
	suspended := func() bool {
		ks := get(t, f.c, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", f.fluxNS, "apps")
		v, _, _ := unstructured.NestedBool(ks.Object, "spec", "suspend")
		return v
	}
	data := func(name string) map[string]any {
		return get(t, f.c, "v1", "ConfigMap", f.ns, name).Object["data"].(map[string]any)
	}

	// (5) An unchanged clone: nothing applied, nothing marked or paused.
	h := runSession(t, f.c, RunOptions{Dir: dir})
	<-h.started
	it := h.ok(t)
	if it.Result.Count(cluster.Unchanged) != 3 || len(it.Paused) != 0 || len(h.record(t, f.c).Owners) != 0 || len(h.record(t, f.c).Saved) != 0 {
		t.Errorf("an unchanged clone: %s, paused %v, record %+v", changes(it), it.Paused, h.record(t, f.c))
	}
	for _, o := range [][2]string{{"Deployment", "web"}, {"ConfigMap", "settings"}, {"ConfigMap", "other"}} {
		if marked(o[0], o[1]) {
			t.Errorf("%s/%s is marked by a session that changes nothing", o[0], o[1])
		}
	}
	h.stop(t)

	// (1) One edit of three objects: that one is taken over, alone.
	write(t, dir, map[string]string{"settings.yaml": strings.Replace(fleet["apps/settings.yaml"], "color: blue", "color: red", 1)})
	h = runSession(t, f.c, RunOptions{Dir: dir})
	<-h.started
	it = h.ok(t)
	if it.Result.Count(cluster.Configured) != 1 || it.Result.Count(cluster.Unchanged) != 2 || !strings.Contains(changes(it), "configmap/settings configured") {
		t.Errorf("one edit: %s", changes(it))
	}
	if len(it.Paused) != 1 || !strings.Contains(it.Paused[0], "Kustomization/"+f.fluxNS+"/apps: 1 object(s) marked") {
		t.Errorf("paused: %v", it.Paused)
	}
	if !marked("ConfigMap", "settings") || marked("ConfigMap", "other") || marked("Deployment", "web") || suspended() {
		t.Errorf("marks: settings %v, other %v, web %v; Kustomization suspended %v", marked("ConfigMap", "settings"), marked("ConfigMap", "other"), marked("Deployment", "web"), suspended())
	}
	if data("settings")["color"] != "red" {
		t.Errorf("the edit is not live: %v", data("settings"))
	}

	// (2) A teammate's commit changing another object reaches the cluster
	// while the session runs; the session says git moved for what it holds.
	rev := f.teammatePush(map[string]string{
		"apps/other.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {v: '2'}\n",
		"apps/settings.yaml": strings.Replace(fleet["apps/settings.yaml"], "data: {color: blue}", "data: {color: blue, size: large}", 1),
	}, "other v2, settings size large")
	f.applied("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "apps", rev)
	if data("other")["v"] != "2" {
		t.Errorf("git's change to another object did not reach the cluster during the session: %v", data("other"))
	}
	if data("settings")["color"] != "red" {
		t.Errorf("Flux reverted the session's edit: %v", data("settings"))
	}
	select {
	case n := <-h.notices:
		if !strings.Contains(n, "git moved: Kustomization/"+f.fluxNS+"/apps now deploys "+rev) || !strings.Contains(n, "configmap/settings") {
			t.Errorf("the notice: %s", n)
		}
	case <-time.After(30 * time.Second):
		t.Error("no notice that git moved for the object the session holds")
	}

	// (4) A save that undoes the edit hands the object back at once.
	write(t, dir, map[string]string{"settings.yaml": fleet["apps/settings.yaml"]})
	it = h.ok(t)
	if it.Result.Count(HandedBack) != 1 || it.Result.Count(cluster.Configured) != 0 || !strings.Contains(changes(it), "configmap/settings handed back") {
		t.Errorf("the edit undone: %s", changes(it))
	}
	if rec := h.record(t, f.c); len(rec.Owners) != 0 || len(rec.Saved) != 0 || len(rec.Applied) != 0 {
		t.Errorf("the record still holds: %+v", rec)
	}
	if marked("ConfigMap", "settings") {
		t.Error("settings is still marked after it was handed back")
	}
	// Flux reconciles it from git (the teammate's size) on its own.
	f.eventually(30*time.Second, func() string {
		if d := data("settings"); d["size"] != "large" || d["color"] != "blue" {
			return fmt.Sprintf("settings is not git's after the hand-back: %v", d)
		}
		return ""
	})
	ownedByFlux(t, get(t, f.c, "v1", "ConfigMap", f.ns, "settings"), "kustomize-controller", "f:data", "f:color")
	// A save of another file does not take git's newer settings back to
	// the developer's older copy: its render did not change.
	write(t, dir, map[string]string{"other.yaml": fleet["apps/other.yaml"] + "# a comment\n"})
	if it := h.ok(t); it.Result.Changed() || data("settings")["size"] != "large" {
		t.Errorf("a save elsewhere: %s, settings %v", changes(it), data("settings"))
	}

	// (3) Edited again, by removing a label git sets (a removal is an
	// edit too: compared as kustomize-controller would apply it), then
	// the session stops: the object is git's and kustomize-controller's
	// again, no mark left, the other object kept.
	tier := func() string { return get(t, f.c, "v1", "ConfigMap", f.ns, "settings").GetLabels()["tier"] }
	write(t, dir, map[string]string{"settings.yaml": strings.Replace(fleet["apps/settings.yaml"], ", labels: {tier: gold}", "", 1)})
	if it := h.ok(t); it.Result.Count(cluster.Configured) != 1 || tier() != "" {
		t.Errorf("a label removed: %s, tier %q", changes(it), tier())
	}
	h.stop(t)
	f.eventually(30*time.Second, func() string {
		if d := data("settings"); d["color"] != "blue" || d["size"] != "large" || tier() != "gold" {
			return fmt.Sprintf("settings after the stop: %v, tier %q", d, tier())
		}
		return ""
	})
	if marked("ConfigMap", "settings") || data("other")["v"] != "2" || suspended() {
		t.Errorf("after the stop: settings marked %v, other %v, suspended %v", marked("ConfigMap", "settings"), data("other"), suspended())
	}
	ownedByFlux(t, get(t, f.c, "v1", "ConfigMap", f.ns, "settings"), "kustomize-controller", "f:data", "f:color")
}

func TestWithinComparesWhatTheRenderSets(t *testing.T) {
	saved := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","uid":"u","labels":{"app":"web","kustomize.toolkit.fluxcd.io/name":"apps"}},
		"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"web","image":"web:1","imagePullPolicy":"IfNotPresent"}]}}}}`
	for _, tc := range []struct {
		name, rendered string
		want           bool
	}{
		{"as saved, defaults and other tools' fields aside", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"},"annotations":{"sluice.dev/applied":"abc"},"creationTimestamp":null},
			"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"web","image":"web:1"}]}}}}`, true},
		{"a value edited", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},"spec":{"replicas":3}}`, false},
		{"a field added", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","annotations":{"note":"x"}}}`, false},
		{"a container added", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"},
			"spec":{"template":{"spec":{"containers":[{"name":"web","image":"web:1"},{"name":"sidecar","image":"s:1"}]}}}}`, false},
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(tc.rendered)); err != nil {
			t.Fatal(err)
		}
		if got := within(u, []byte(saved)); got != tc.want {
			t.Errorf("%s: within = %v, want %v", tc.name, got, tc.want)
		}
	}
}
