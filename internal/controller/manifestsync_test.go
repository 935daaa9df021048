package controller

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

const webSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: DST, branch: env/dev, path: apps/web}
  interval: 1h
`

// The whole life of a sync as a person sees it with kubectl: hydrated and
// Ready with what was done in its status and an Event, printer columns,
// a new source commit picked up when asked (the requestedAt annotation),
// webhooks from a forge and a registry (a bad signature refused), and
// suspend.
func TestManifestSyncLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addrs, _ := e.start()
	ctx := context.Background()
	e.apply(webSync)
	ms := e.ready("web", metav1.ConditionTrue, 30*time.Second)

	tip := e.tip("env/dev")
	st := ms.Status
	if st.Destination == nil || st.Destination.Commit != tip || st.Destination.Branch != "env/dev" || st.Destination.Path != "apps/web" {
		t.Errorf("status.destination = %+v, want commit %s on env/dev apps/web", st.Destination, tip)
	}
	if st.Source == nil || st.Source.Commit != e.app.Head() || st.Source.Path != "deploy/web" {
		t.Errorf("status.source = %+v, want commit %s", st.Source, e.app.Head())
	}
	if len(st.Images) != 1 || st.Images[0].Tag != "v1" || !strings.HasPrefix(st.Images[0].Digest, "sha256:") {
		t.Errorf("status.images = %+v", st.Images)
	}
	if !strings.Contains(e.dst("show", "env/dev:apps/web/deployment-web.yaml"), "@sha256:") {
		t.Errorf("the destination folder is not hydrated with a pinned image:\n%s", e.dst("ls-tree", "-r", "env/dev"))
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "Committed") })

	// kubectl shows the columns a person reads.
	out, err := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "get", "manifestsyncs", "-n", e.ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME READY SOURCE COMMIT DESTINATION COMMIT AGE MESSAGE" ||
		!strings.Contains(lines[1], "True") || !strings.Contains(lines[1], tip) || !strings.Contains(lines[1], "committed") {
		t.Errorf("kubectl get manifestsyncs:\n%s", out)
	}
	// The metrics endpoint counts the render and the commit.
	m := scrape(t, addrs.Metrics)
	for _, name := range []string{"sluice_renders_total", "sluice_commits_total", `sluice_git_requests_total{op="push"}`} {
		if m[name] < 1 {
			t.Errorf("metrics: %s is %v after a render and a commit", name, m[name])
		}
	}

	// A new source commit is not fetched before the interval (1h), though
	// the sync is reconciled (a new generation: a shorter interval, still
	// longer than the clone's age) ...
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: '1'}\n"}).Commit("cm")
	e.app.Push("main")
	e.apply(strings.Replace(webSync, "interval: 1h", "interval: 59m", 1))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if e.tip("env/dev") != tip || ms.Status.Source.Commit == e.app.Head() {
		t.Fatal("the destination moved before the interval or any request")
	}
	// ... but at once when a person asks, with date +%s.
	e.requestReconcile(ms, strconv.FormatInt(time.Now().Unix(), 10))
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if ms.Status.Source.Commit != e.app.Head() || e.tip("env/dev") == tip || e.dst("show", "env/dev:apps/web/configmap-web.yaml") == "" {
		t.Fatalf("after the request: source %s (want %s), destination %s", ms.Status.Source.Commit, e.app.Head(), e.tip("env/dev"))
	}
	tip = e.tip("env/dev")

	// A receiver, and a GitHub push event signed with its token.
	e.receiver("hooks", "s3cret")
	hookURL := "http://" + addrs.Hook + "/hook/" + e.ns + "/hooks"
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: '2'}\n"}).Commit("cm 2")
	e.app.Push("main")
	push := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q,"html_url":"http://example.invalid/x"}}`, e.app.Head(), e.appURL)
	if code, body := post(t, hookURL, push, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("wrong", push)}); code != http.StatusUnauthorized {
		t.Fatalf("a bad signature: %d %s", code, body)
	}
	if got := e.sync("web").Annotations[v1alpha1.ReconcileRequestAnnotation]; got != ms.Annotations[v1alpha1.ReconcileRequestAnnotation] {
		t.Fatalf("a refused hook changed the sync: %q", got)
	}
	regBefore, annotated := e.reg.Requests.Load(), e.sync("web").Annotations[v1alpha1.ReconcileRequestAnnotation]
	if code, body := post(t, hookURL, push, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("s3cret", push)}); code != http.StatusAccepted || !strings.Contains(body, "ManifestSync/web") {
		t.Fatalf("a signed push: %d %s", code, body)
	}
	e.eventually(30*time.Second, func() string {
		if e.tip("env/dev") == tip {
			return "the push hook led to no commit"
		}
		return ""
	})
	// The leader queued the reconcile itself (no annotation to wait
	// on): the status follows the commit by a patch.
	e.eventually(10*time.Second, func() string {
		if ms = e.sync("web"); ms.Status.Source == nil || ms.Status.Source.Commit != e.app.Head() {
			return fmt.Sprintf("after the hook: status.source %+v, want commit %s", ms.Status.Source, e.app.Head())
		}
		return ""
	})
	ms = e.ready("web", metav1.ConditionTrue, 10*time.Second)
	// A git push is news of the source, not of the tags: they are looked
	// up as their interval says. And the leader that received it queued
	// the reconcile itself: nothing was written to the sync (with 500
	// syncs of one repository, 500 annotations and 500 statuses saying
	// the request was handled took 9 s at the client's rate).
	if n := e.reg.Requests.Load() - regBefore; n != 0 {
		t.Errorf("a git push hook made %d registry requests, want none", n)
	}
	if got := ms.Annotations[v1alpha1.ReconcileRequestAnnotation]; got != annotated || ms.Annotations[v1alpha1.ReconcileRequestForAnnotation] != "" {
		t.Errorf("the leader's hook annotated the sync: %q (was %q) for %q", got, annotated, ms.Annotations[v1alpha1.ReconcileRequestForAnnotation])
	}
	tip = e.tip("env/dev")

	// A registry's push notification for the followed tag re-pins it.
	moved := e.reg.Push(t, "team/app:v1")
	note := fmt.Sprintf(`{"events":[{"action":"push","target":{"repository":"team/app","tag":"v1","digest":%q},"request":{"host":%q}}]}`, moved, e.reg.Host)
	if code, body := post(t, hookURL, note, map[string]string{"Authorization": "Bearer nope"}); code != http.StatusUnauthorized {
		t.Fatalf("a registry notification with a wrong token: %d %s", code, body)
	}
	if code, body := post(t, hookURL, note, map[string]string{"Authorization": "Bearer s3cret", "Content-Type": "application/vnd.docker.distribution.events.v1+json"}); code != http.StatusAccepted || !strings.Contains(body, "ManifestSync/web") {
		t.Fatalf("a registry notification: %d %s", code, body)
	}
	e.eventually(30*time.Second, func() string {
		ms := e.sync("web")
		if len(ms.Status.Images) != 1 || ms.Status.Images[0].Digest != moved {
			return fmt.Sprintf("images %+v, want %s", ms.Status.Images, moved)
		}
		if !strings.Contains(e.dst("show", "env/dev:apps/web/deployment-web.yaml"), moved) {
			return "the destination does not pin the moved tag"
		}
		return ""
	})
	tip = e.tip("env/dev")

	// Suspended: nothing is done, whatever is asked.
	ms = e.sync("web")
	ms.Spec.Suspend = true
	if err := e.c.Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ms = e.ready("web", metav1.ConditionFalse, 10*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonSuspended {
		t.Errorf("suspended: Ready %s %s", c.Reason, c.Message)
	}
	e.app.Write(map[string]string{"deploy/web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {a: '3'}\n"}).Commit("cm 3")
	e.app.Push("main")
	e.requestReconcile(ms, "suspended-request")
	// The request is handled (seen, and nothing done) before the look.
	e.ready("web", metav1.ConditionFalse, 10*time.Second)
	if e.tip("env/dev") != tip {
		t.Fatal("a suspended sync committed")
	}
	ms = e.sync("web")
	ms.Spec.Suspend = false
	if err := e.c.Update(ctx, ms); err != nil {
		t.Fatal(err)
	}
	ms = e.ready("web", metav1.ConditionTrue, 30*time.Second)
	if ms.Status.Source.Commit != e.app.Head() {
		t.Errorf("resumed: source %s, want %s", ms.Status.Source.Commit, e.app.Head())
	}
}

// receiver creates a webhook receiver Secret.
func (e *env) receiver(name, token string) {
	e.t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{ReceiverLabel: "true"}},
		StringData: map[string]string{"token": token}}
	if err := e.c.Create(context.Background(), sec); err != nil {
		e.t.Fatal(err)
	}
}

// hasEvent is "" when the object has an Event of that reason.
func (e *env) hasEvent(name, reason string) string {
	var list eventsv1.EventList
	if err := e.c.List(context.Background(), &list, client.InNamespace(e.ns)); err != nil {
		return err.Error()
	}
	var seen []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			if ev.Reason == reason {
				return ""
			}
			seen = append(seen, ev.Reason+": "+ev.Note)
		}
	}
	return fmt.Sprintf("no %s Event for %s (have %q)", reason, name, seen)
}

func sign(token, body string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func post(t *testing.T, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAnIdleSyncWritesNoStatus, as the API server of a platform with
// thousands of syncs: a sync reconciled at each of its intervals with
// nothing of its own changed writes nothing, even when another sync's
// commit moved the branch they share (its status still names the commit
// that wrote its folder, and still says it committed it).
func TestAnIdleSyncWritesNoStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addrs, _ := e.start()
	e.apply(strings.Replace(webSync, "interval: 1h", "interval: 2s", 1))
	e.apply(strings.NewReplacer("name: web", "name: other", "apps/web", "apps/other").Replace(webSync))
	web := e.ready("web", metav1.ConditionTrue, 30*time.Second)
	other := e.ready("other", metav1.ConditionTrue, 30*time.Second)
	// Whichever committed last, the branch moves once more: the other
	// sync writes a new folder.
	other.Spec.Destination.Path = "apps/other2"
	if err := e.c.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, func() string {
		if e.dst("ls-tree", "env/dev", "apps/other2") == "" {
			return "apps/other2 not written yet"
		}
		return ""
	})
	web = e.sync("web")
	written := web.Status.Destination.Commit
	if written == e.tip("env/dev") {
		t.Fatalf("web's status names the branch's head %s, which the other sync's commit made", written)
	}
	reconciles := func() float64 {
		return scrape(t, addrs.Metrics)[`controller_runtime_reconcile_total{controller="manifestsync",result="requeue_after"}`]
	}
	before, rv := reconciles(), web.ResourceVersion
	time.Sleep(7 * time.Second)
	if n := reconciles() - before; n < 2 {
		t.Fatalf("%v reconciles in 7 s of a 2 s interval", n)
	}
	if now := e.sync("web"); now.ResourceVersion != rv {
		t.Errorf("an idle sync's status was written: %+v\nwas %+v", now.Status, web.Status)
	}
}
