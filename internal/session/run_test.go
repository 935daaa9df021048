package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/testenv"
)

// harness runs Run in the background and hands its iterations to the test.
type harness struct {
	its     chan Iteration
	started chan Started
	cancel  context.CancelFunc
	done    chan struct{}
	out     *Outcome
	err     error
	name    string
	notices chan string
}

func runSession(t *testing.T, c *cluster.Client, o RunOptions) *harness {
	t.Helper()
	h := &harness{its: make(chan Iteration, 100), started: make(chan Started, 1), done: make(chan struct{})}
	if o.Session.Name == "" {
		o.Session.Name = "r" + strings.ReplaceAll(strings.TrimPrefix(testenv.Namespace("r"), "r-"), "-", "")
	}
	o.Session.RenewInterval = 200 * time.Millisecond
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = -1
	}
	h.name, h.notices = o.Session.Name, make(chan string, 100)
	o.OnIteration = func(it Iteration) { h.its <- it }
	o.OnNotice = func(n string) { h.notices <- n }
	o.OnStart = func(s Started) { h.started <- s }
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		h.out, h.err = Run(ctx, c, o)
	}()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// start waits for the session to start, failing if it ends first.
func (h *harness) start(t *testing.T) Started {
	t.Helper()
	select {
	case st := <-h.started:
		return st
	case <-h.done:
		t.Fatalf("the session ended before it started: %v", h.err)
	case <-time.After(60 * time.Second):
		t.Fatal("the session did not start within 60s")
	}
	return Started{}
}

// record reads the session's record on the cluster.
func (h *harness) record(t *testing.T, c *cluster.Client) *Record {
	t.Helper()
	rec, err := (&store{c: c.Kube(), name: h.name}).read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// next waits for the next iteration.
func (h *harness) next(t *testing.T) Iteration {
	t.Helper()
	select {
	case it := <-h.its:
		return it
	case <-h.done:
		t.Fatalf("the session ended: %v", h.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no iteration within 30s")
	}
	return Iteration{}
}

// ok waits for the next iteration and fails on its error.
func (h *harness) ok(t *testing.T) Iteration {
	t.Helper()
	it := h.next(t)
	if it.Err != nil {
		t.Fatalf("iteration %d: %v", it.N, it.Err)
	}
	return it
}

func (h *harness) stop(t *testing.T) *Outcome {
	t.Helper()
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the session did not end within 60s")
	}
	if h.err != nil {
		t.Fatalf("stopping: %v", h.err)
	}
	return h.out
}

func changes(it Iteration) string {
	if it.Result == nil {
		return ""
	}
	var out []string
	for _, l := range strings.Split(actions(it.Result), "\n") {
		if !strings.HasSuffix(l, " unchanged") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mkNamespace(t *testing.T, c *cluster.Client, ns string) {
	t.Helper()
	applyAs(t, c, "kubectl", parse(t, ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n"))
}

func cm(name, data string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {" + data + "}\n"
}

func TestRunFollowsSavesBranchSwitchesAndBadInput(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("run")
	mkNamespace(t, c, ns)
	before := dump(t, []string{ns})
	w := testenv.NewWork(t, "")
	w.Write(map[string]string{
		"deploy/kustomization.yaml": "namespace: " + ns + "\nresources: [a.yaml, b.yaml]\n",
		"deploy/a.yaml":             cm("a", "v: '1'"),
		"deploy/b.yaml":             cm("b", "v: '1'"),
		".gitignore":                "scratch/\n",
	})
	w.Commit("main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "feature")
	w.Write(map[string]string{
		"deploy/kustomization.yaml": "namespace: " + ns + "\nresources: [a.yaml, c.yaml]\n",
		"deploy/b.yaml":             "",
		"deploy/c.yaml":             cm("c", "v: '1'"),
	})
	w.Commit("feature: b becomes c")
	testenv.Git(t, w.Dir, "checkout", "-q", "main")

	h := runSession(t, c, RunOptions{Dir: filepath.Join(w.Dir, "deploy")})
	it := h.ok(t)
	if got := changes(it); got != "configmap/a created\nconfigmap/b created" || it.Branch != "main" {
		t.Fatalf("first iteration on %s:\n%s", it.Branch, got)
	}

	// A save.
	write(t, w.Dir, map[string]string{"deploy/a.yaml": cm("a", "v: '2'")})
	it = h.ok(t)
	if got := changes(it); got != "configmap/a configured" || len(it.Trigger) == 0 || it.Trigger[0] != "deploy/a.yaml" {
		t.Fatalf("after saving a.yaml (trigger %v):\n%s", it.Trigger, got)
	}
	if it.Latency <= 0 || it.Latency > 5*time.Second {
		t.Errorf("latency %s", it.Latency)
	}

	// An ignored file and a file the render does not read: no iteration.
	write(t, w.Dir, map[string]string{"scratch/notes.yaml": "x: 1\n", "README.md": "hello\n"})
	select {
	case it := <-h.its:
		t.Fatalf("an iteration for files the render does not read (trigger %v)", it.Trigger)
	case <-time.After(400 * time.Millisecond):
	}

	// A branch switch: b goes, c comes.
	testenv.Git(t, w.Dir, "checkout", "-q", "feature")
	it = h.ok(t)
	// (a.yaml is the same on both branches: git keeps the edit.)
	if got := changes(it); got != "configmap/b deleted\nconfigmap/c created" || it.Branch != "feature" {
		t.Fatalf("after switching to feature (branch %q):\n%s", it.Branch, got)
	}
	if get(t, c, "v1", "ConfigMap", ns, "b") != nil {
		t.Error("b survived the branch switch")
	}

	// A YAML error mid-session: reported with its file, the session goes on.
	write(t, w.Dir, map[string]string{"deploy/c.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [c\n"})
	it = h.next(t)
	if it.Err == nil || !strings.Contains(it.Err.Error(), "c.yaml") {
		t.Fatalf("a YAML error: %v", it.Err)
	}
	write(t, w.Dir, map[string]string{"deploy/c.yaml": cm("c", "v: '3'")})
	if got := changes(h.ok(t)); got != "configmap/c configured" {
		t.Fatalf("after fixing c.yaml:\n%s", got)
	}
	select {
	case it := <-h.its:
		t.Errorf("an unexpected iteration (trigger %v): %s", it.Trigger, changes(it))
	default:
	}

	out := h.stop(t)
	if out.Reason != "interrupted" || len(out.Restoration.Deleted) != 2 {
		t.Errorf("outcome: %+v %+v", out, out.Restoration)
	}
	sameDump(t, before, dump(t, []string{ns}))
}

func TestRunInstallsCRDsWithTheirResourcesAndRemovesThem(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("crd")
	mkNamespace(t, c, ns)
	group := ns + ".example.com"
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"kustomization.yaml": "namespace: " + ns + "\nresources: [crd.yaml, gadgets.yaml]\n",
		"crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.` + group + `}
spec:
  group: ` + group + `
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}}
`,
		"gadgets.yaml": "apiVersion: " + group + "/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 1}\n---\napiVersion: " + group + "/v1\nkind: Gadget\nmetadata: {name: g2}\nspec: {size: 2}\n",
	})
	before := dump(t, []string{ns}, "CustomResourceDefinition/gadgets."+group)
	h := runSession(t, c, RunOptions{Dir: dir})
	it := h.ok(t)
	if got := changes(it); got != "customresourcedefinition.apiextensions.k8s.io/gadgets."+group+" created\ngadget."+group+"/g1 created\ngadget."+group+"/g2 created" {
		t.Fatalf("first iteration:\n%s", got)
	}
	write(t, dir, map[string]string{"gadgets.yaml": "apiVersion: " + group + "/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: 10}\n"})
	if got := changes(h.ok(t)); got != "gadget."+group+"/g1 configured\ngadget."+group+"/g2 deleted" {
		t.Fatalf("after an edit:\n%s", got)
	}
	h.stop(t)
	// The CRD goes (the API server finalizes it), with its resources.
	deadline := time.Now().Add(20 * time.Second)
	for get(t, c, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "gadgets."+group) != nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	sameDump(t, before, dump(t, []string{ns}, "CustomResourceDefinition/gadgets."+group))
}

const chart = `apiVersion: v2
name: hello
version: 0.1.0
`

const chartTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
  labels: {app: hello}
data:
  greeting: {{ .Values.greeting | quote }}
  color: {{ .Values.color | quote }}
  token: {{ .Values.secret.token | quote }}
  namespace: {{ .Release.Namespace | quote }}
`

func TestRunRendersAChartWithItsHelmReleaseValues(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("helm")
	mkNamespace(t, c, ns)
	// A HelmRelease deploys the chart; its values come from itself, a
	// ConfigMap and a Secret (at a target path).
	applyAs(t, c, "kubectl", parse(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: hello-values, namespace: %[1]s}
data:
  values.yaml: "color: red\ngreeting: overridden-below\n"
---
apiVersion: v1
kind: Secret
metadata: {name: hello-secret, namespace: %[1]s}
stringData: {token: s3cr3t}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: hello, namespace: %[1]s}
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/hello
      sourceRef: {kind: GitRepository, name: platform}
  values: {greeting: from-the-helmrelease, secret: {token: replaced-by-targetPath}}
  valuesFrom:
  - {kind: ConfigMap, name: hello-values}
  - {kind: Secret, name: hello-secret, valuesKey: token, targetPath: secret.token}
  - {kind: ConfigMap, name: missing, optional: true}
`))
	// What helm-controller installed.
	applyAs(t, c, "helm-controller", parse(t, ns, `apiVersion: v1
kind: ConfigMap
metadata:
  name: hello-settings
  namespace: %[1]s
  labels: {app: hello, helm.toolkit.fluxcd.io/name: hello, helm.toolkit.fluxcd.io/namespace: %[1]s}
data: {greeting: from-the-helmrelease, color: red, token: s3cr3t, namespace: %[1]s}
`))
	before := dump(t, []string{ns})
	dir := filepath.Join(t.TempDir(), "charts", "hello")
	write(t, dir, map[string]string{"Chart.yaml": chart, "values.yaml": "greeting: chart-default\ncolor: white\nsecret: {token: none}\n", "templates/cm.yaml": chartTemplate})

	// No -n: the HelmRelease says where.
	h := runSession(t, c, RunOptions{Dir: dir})
	st := <-h.started
	if st.HelmRelease == nil || st.HelmRelease.Name != "hello" || st.Namespace != ns {
		t.Fatalf("started: %+v", st)
	}
	h.ok(t)
	// Rendered with the HelmRelease's values, the chart gives what runs.
	live := get(t, c, "v1", "ConfigMap", ns, "hello-settings")
	want := map[string]any{"greeting": "from-the-helmrelease", "color": "red", "token": "s3cr3t", "namespace": ns}
	if live == nil || !reflect.DeepEqual(live.Object["data"], want) {
		t.Fatalf("live data %v, want %v", live.Object["data"], want)
	}
	// The developer changes the template: the HelmRelease is suspended.
	write(t, dir, map[string]string{"templates/cm.yaml": strings.Replace(chartTemplate, "labels: {app: hello}", "labels: {app: hello, edited: \"yes\"}", 1)})
	if got := changes(h.ok(t)); got != "configmap/hello-settings configured" {
		t.Fatalf("after editing the template:\n%s", got)
	}
	hr := get(t, c, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, "hello")
	if hr.Object["spec"].(map[string]any)["suspend"] != true {
		t.Error("the HelmRelease is not suspended")
	}
	h.stop(t)
	sameDump(t, before, dump(t, []string{ns}))
}

func TestRunValuesFilesWinOverTheHelmRelease(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("helmv")
	mkNamespace(t, c, ns)
	dir := filepath.Join(t.TempDir(), "hello")
	write(t, dir, map[string]string{"Chart.yaml": chart, "values.yaml": "greeting: chart-default\ncolor: white\nsecret: {token: none}\n", "dev.yaml": "color: purple\n", "templates/cm.yaml": chartTemplate})
	o := RunOptions{Dir: dir, Session: Options{Namespace: ns}}
	o.Render.Render = &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ValuesFiles: []string{"dev.yaml"}}}
	h := runSession(t, c, o)
	h.ok(t)
	live := get(t, c, "v1", "ConfigMap", ns, "hello-settings")
	if live == nil || live.Object["data"].(map[string]any)["color"] != "purple" {
		t.Fatalf("live: %v", live)
	}
	h.stop(t)
}

func TestVersionModeRunsBesideTheWorkloadAndDiffsNamespaces(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	ns := testenv.Namespace("ver")
	workload := `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: %[1]s}
data: {color: blue}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec: {selector: {app: web}, ports: [{port: 80}]}
`
	applyAs(t, c, "kubectl", parse(t, ns, workload))
	before := dump(t, []string{ns})
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"settings.yaml": cm("settings", "color: green"),
		"web.yaml":      "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n",
		"extra.yaml":    cm("extra", "new: 'yes'"),
		"role.yaml":     "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: " + ns + "-reader}\nrules: []\n",
	})
	name := "v" + strings.ReplaceAll(strings.TrimPrefix(testenv.Namespace("v"), "v-"), "-", "")
	h := runSession(t, c, RunOptions{Dir: dir, Session: Options{Name: name, Namespace: ns, Mode: Version}})
	it := h.next(t)
	if it.Err == nil || !strings.Contains(it.Err.Error(), "ClusterRole/"+ns+"-reader (") || !strings.Contains(it.Err.Error(), "--allow-cluster-scoped") {
		t.Fatalf("a cluster-scoped object in version mode: %v", it.Err)
	}
	os.Remove(filepath.Join(dir, "role.yaml"))
	it = h.ok(t)
	side := ns + "-" + name
	if got := changes(it); got != "configmap/extra created\nconfigmap/settings created\nnamespace/"+side+" created\nservice/web created" {
		t.Fatalf("first good iteration:\n%s", got)
	}
	// The workload it runs beside is untouched.
	sameDump(t, before, dump(t, []string{ns}))
	d, err := c.DiffNamespaces(ctx, ns, side)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.OnlyInA) != 0 || len(d.OnlyInB) != 1 || d.OnlyInB[0].Name != "extra" || len(d.Different) != 1 || d.Different[0].Ref.Name != "settings" || d.Same != 1 {
		t.Fatalf("namespace diff: %+v", d)
	}
	if !strings.Contains(d.Different[0].Diff, "-  color: blue\n+  color: green") {
		t.Errorf("settings diff:\n%s", d.Different[0].Diff)
	}
	// The tree drops the Service: the version's copy goes, the
	// workload's stays.
	os.Remove(filepath.Join(dir, "web.yaml"))
	if got := changes(h.ok(t)); got != "service/web deleted" {
		t.Errorf("web.yaml removed:\n%s", got)
	}
	if get(t, c, "v1", "Service", side, "web") != nil || get(t, c, "v1", "Service", ns, "web") == nil {
		t.Error("the version's Service should be gone, the workload's kept")
	}
	sameDump(t, before, dump(t, []string{ns}))
	h.stop(t)
	sameDump(t, before, dump(t, []string{ns, side}))
}

func TestRunRetriesWhileTheAPIServerRestarts(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("restart")
	mkNamespace(t, c, ns)
	before := dump(t, []string{ns})
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.yaml": cm("a", "v: '1'")})
	h := runSession(t, c, RunOptions{Dir: dir, Session: Options{Namespace: ns}})
	h.ok(t)
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"a.yaml": cm("a", "v: '2'")})
	it := h.next(t)
	if it.Err == nil || !it.Retrying || !errors.Is(it.Err, cluster.ErrUnreachable) && !cluster.IsUnreachable(it.Err) {
		cp.StartAPIServer()
		t.Fatalf("with the API server down: %v (retrying %v)", it.Err, it.Retrying)
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// Retried every second until the API server answers.
	for {
		it = h.next(t)
		if it.Err == nil {
			break
		}
		if !it.Retrying {
			t.Fatalf("after the restart: %v", it.Err)
		}
	}
	if get(t, c, "v1", "ConfigMap", ns, "a").Object["data"].(map[string]any)["v"] != "2" {
		t.Error("the save made while the API server was down was not applied")
	}
	h.stop(t)
	sameDump(t, before, dump(t, []string{ns}))
}

func TestHandoffKeepsASnowflakeWorkloadForFlux(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("snow")
	applyAs(t, c, "kubectl", parse(t, ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %[1]s}\ndata: {color: blue}\n"))
	w := testenv.NewWork(t, "https://git.example.com/team/platform.git")
	w.Write(map[string]string{"deploy/dev/settings.yaml": cm("settings", "color: green"), "deploy/dev/extra.yaml": cm("extra", "v: '1'")})
	w.Commit("dev")
	h := runSession(t, c, RunOptions{Dir: filepath.Join(w.Dir, "deploy", "dev"), Session: Options{Namespace: ns, Handoff: true}})
	h.ok(t)
	out := h.stop(t)
	if len(out.Restoration.Kept) != 2 {
		t.Errorf("kept: %+v", out.Restoration)
	}
	for _, name := range []string{"settings", "extra"} {
		u := get(t, c, "v1", "ConfigMap", ns, name)
		if u == nil || u.GetAnnotations()[annotationSession] != "" {
			t.Errorf("%s after the handoff: %v", name, u)
		}
	}
	y := string(out.Handoff)
	for _, want := range []string{"kind: GitRepository", "url: https://git.example.com/team/platform.git", "branch: main", "kind: Kustomization", "path: ./deploy/dev", "targetNamespace: " + ns, "prune: true"} {
		if !strings.Contains(y, want) {
			t.Errorf("handoff manifests lack %q:\n%s", want, y)
		}
	}
	// A workload Flux owns is not a snowflake.
	fns, _ := fluxSetup(t, c)
	dir := t.TempDir()
	write(t, dir, map[string]string{"s.yaml": cm("settings", "color: x")})
	h = runSession(t, c, RunOptions{Dir: dir, Session: Options{Namespace: fns, Handoff: true}})
	if it := h.next(t); it.Err == nil || !strings.Contains(it.Err.Error(), "--handoff is for a workload no GitOps tool manages") {
		t.Errorf("handoff of a Flux workload: %v", it.Err)
	}
}

func TestRunOnABranchOfARemoteRepository(t *testing.T) {
	c := newClient(t)
	ns := testenv.Namespace("pr")
	mkNamespace(t, c, ns)
	srv := testenv.NewGitServer(t)
	url := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, url)
	w.Write(map[string]string{"README.md": "app\n"})
	w.Commit("main")
	w.Push("HEAD:refs/heads/main")
	testenv.Git(t, w.Dir, "checkout", "-q", "-b", "alice/feature")
	w.Write(map[string]string{"deploy/a.yaml": cm("a", "v: '1'")})
	w.Commit("feature")
	w.Push("HEAD:refs/heads/alice/feature")

	h := runSession(t, c, RunOptions{Dir: "deploy", Repo: url, Ref: "alice/feature", Poll: 200 * time.Millisecond, Session: Options{Namespace: ns}})
	it := h.ok(t)
	if got := changes(it); got != "configmap/a created" || it.Branch != "alice/feature" {
		t.Fatalf("first iteration on %q:\n%s", it.Branch, got)
	}
	// Alice pushes again: the poll picks it up.
	w.Write(map[string]string{"deploy/a.yaml": cm("a", "v: '2'")})
	w.Commit("more")
	w.Push("HEAD:refs/heads/alice/feature")
	for {
		it = h.ok(t)
		if changes(it) != "" {
			break
		}
	}
	if got := changes(it); got != "configmap/a configured" {
		t.Fatalf("after a push:\n%s", got)
	}
	h.stop(t)
}
