package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

func newClient(t *testing.T) *Client {
	t.Helper()
	c, err := Connect(ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objects parses multi-document YAML, %[1]s being the test's namespace.
func objects(t *testing.T, ns, docs string) []Object {
	t.Helper()
	var out []Object
	for i, doc := range strings.Split(strings.ReplaceAll(docs, "%[1]s", ns), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, Object{Unstructured: u, Origin: fmt.Sprintf("set.yaml:%d", i+1)})
	}
	return out
}

func actions(res *Result) string {
	var out []string
	for _, c := range res.Changes {
		out = append(out, c.Ref.String()+" "+string(c.Action))
	}
	return strings.Join(out, "\n")
}

func get(t *testing.T, c *Client, apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
}

const crdSet = `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.%[1]s.example.com}
spec:
  group: %[1]s.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: %[1]s.example.com/v1
kind: Widget
metadata: {name: small}
spec: {size: 1}
---
apiVersion: %[1]s.example.com/v1
kind: Widget
metadata: {name: large}
spec: {size: 9}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
`

func TestApplyInstallsCRDsAndTheirResourcesInOneRun(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("crd")
	set := objects(t, ns, crdSet)
	res, err := c.Apply(context.Background(), set, ApplyOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count(Created) != 5 {
		t.Fatalf("changes:\n%s", actions(res))
	}
	w, err := get(t, c, ns+".example.com/v1", "Widget", ns, "large")
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 9 {
		t.Errorf("widget size = %d", size)
	}
	if m := w.GetManagedFields(); len(m) == 0 || m[0].Manager != FieldManager {
		t.Errorf("field manager = %+v", m)
	}
	again, err := c.Apply(context.Background(), objects(t, ns, crdSet), ApplyOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() || again.Count(Unchanged) != 5 {
		t.Errorf("reapply:\n%s", actions(again))
	}
}

const threeObjects = `apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data: {v: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
data: {v: "1"}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports: [{port: 80}]
`

func TestApplyPrunesWhatTheSetNoLongerHas(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("prune")
	mkNamespace(t, c, ns)
	inv, _ := ParseInventory("web", ns)
	ctx := context.Background()
	if _, err := c.Apply(ctx, objects(t, ns, threeObjects), ApplyOptions{Namespace: ns, Inventory: &inv, Prune: true}); err != nil {
		t.Fatal(err)
	}
	parent, err := get(t, c, "v1", "Secret", ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if parent.GetLabels()[labelApplySetID] != inv.ID() || parent.GetAnnotations()[annotationGroupKinds] != "ConfigMap,Service" || parent.GetAnnotations()[annotationTooling] != "sluice/v1alpha1" {
		t.Errorf("parent: labels %v annotations %v", parent.GetLabels(), parent.GetAnnotations())
	}
	cm, _ := get(t, c, "v1", "ConfigMap", ns, "a")
	if cm.GetLabels()[labelPartOf] != inv.ID() {
		t.Errorf("member labels %v", cm.GetLabels())
	}
	// The set drops b and the Service.
	res, err := c.Apply(ctx, objects(t, ns, strings.Split(threeObjects, "\n---\n")[0]), ApplyOptions{Namespace: ns, Inventory: &inv, Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(res); got != "configmap/a unchanged\nconfigmap/b deleted\nservice/web deleted" {
		t.Errorf("changes:\n%s", got)
	}
	if _, err := get(t, c, "v1", "ConfigMap", ns, "b"); err == nil {
		t.Error("b survived the prune")
	}
	parent, _ = get(t, c, "v1", "Secret", ns, "web")
	if parent.GetAnnotations()[annotationGroupKinds] != "ConfigMap" {
		t.Errorf("parent after prune: %v", parent.GetAnnotations())
	}
	// kubectl's ApplySet tooling recognises the parent as Sluice's.
	cmd := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "apply", "--server-side", "--prune", "--applyset=secret/web", "-n", ns, "-f", "-")
	cmd.Env = append(cmd.Environ(), "KUBECTL_APPLYSET=true")
	cmd.Stdin = strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), `managed by tooling "sluice"`) {
		t.Errorf("kubectl on Sluice's ApplySet said: %s", out)
	}
}

func TestApplyAppliesNothingWhenTheSetIsInvalid(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("bad")
	mkNamespace(t, c, ns)
	ctx := context.Background()
	bad := objects(t, ns, threeObjects+`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken}
spec:
  replicas: many
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: x, image: x}]}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g}
`)
	_, err := c.Apply(ctx, bad, ApplyOptions{Namespace: ns})
	if err == nil || !strings.Contains(err.Error(), "Gadget/g (set.yaml:5): the cluster does not know kind Gadget") {
		t.Fatalf("unknown kind: %v", err)
	}
	_, err = c.Apply(ctx, bad[:4], ApplyOptions{Namespace: ns})
	if err == nil || !strings.Contains(err.Error(), "Deployment/"+ns+"/broken (set.yaml:4)") || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("invalid field: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := get(t, c, "v1", "ConfigMap", ns, name); err == nil {
			t.Errorf("ConfigMap %s was applied although the set failed its dry run", name)
		}
	}
	res, err := c.Apply(ctx, bad[:4], ApplyOptions{Namespace: ns, ContinueOnError: true})
	if err == nil || res.Count(Created) != 3 || res.Count(Failed) != 1 {
		t.Fatalf("--continue-on-error: %v\n%s", err, actions(res))
	}
}

func TestDiffReportsEachKindOfChangeAndMasksSecrets(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("diff")
	mkNamespace(t, c, ns)
	inv, _ := ParseInventory("d", ns)
	ctx := context.Background()
	base := threeObjects + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {password: hunter2}\n"
	if _, err := c.Apply(ctx, objects(t, ns, base), ApplyOptions{Namespace: ns, Inventory: &inv, Prune: true}); err != nil {
		t.Fatal(err)
	}
	next := strings.Replace(base, `data: {v: "1"}`, `data: {v: "2"}`, 1)           // a configured
	next = strings.Replace(next, "hunter2", "correct-horse", 1)                    // s configured
	next = strings.Replace(next, "metadata: {name: b}", "metadata: {name: b2}", 1) // b deleted, b2 created
	res, err := c.Diff(ctx, objects(t, ns, next), DiffOptions{Namespace: ns, Inventory: &inv})
	if err != nil {
		t.Fatal(err)
	}
	SortChanges(res.Changes)
	if got := actions(res); got != "configmap/a configured\nconfigmap/b deleted\nconfigmap/b2 created\nsecret/s configured\nservice/web unchanged" {
		t.Errorf("diff:\n%s", got)
	}
	all := ""
	for _, ch := range res.Changes {
		all += ch.Diff
		if ch.Ref.Name == "a" && !strings.Contains(ch.Diff, "-  v: \"1\"\n+  v: \"2\"") {
			t.Errorf("diff of a:\n%s", ch.Diff)
		}
		if strings.Contains(ch.Diff, "managedFields") || strings.Contains(ch.Diff, "resourceVersion") || strings.Contains(ch.Diff, annotationApplied) {
			t.Errorf("noise in the diff of %s:\n%s", ch.Ref, ch.Diff)
		}
	}
	if strings.Contains(all, "hunter2") || strings.Contains(all, "correct-horse") || strings.Contains(all, "aHVudGVyMg") {
		t.Errorf("a secret value shows:\n%s", all)
	}
	// Diff changed nothing.
	if cm, _ := get(t, c, "v1", "ConfigMap", ns, "b"); cm == nil || cm.GetName() != "b" {
		t.Error("diff deleted b")
	}
}

func TestWaitReportsWhatIsNotReadyAndWhy(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("wait")
	mkNamespace(t, c, ns)
	set := objects(t, ns, `apiVersion: v1
kind: ConfigMap
metadata: {name: ready}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: never}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: x, image: registry.example.com/x:1}]}
`)
	// The test control plane has no controllers: a Deployment never rolls out.
	res, err := c.Apply(context.Background(), set, ApplyOptions{Namespace: ns, Wait: true, Timeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "deployment.apps/never: InProgress") {
		t.Fatalf("wait: %v", err)
	}
	if len(res.NotReady) != 1 || res.NotReady[0].Ref.Name != "never" || res.NotReady[0].Message == "" {
		t.Errorf("not ready: %+v", res.NotReady)
	}
}

func TestApplySurvivesTheAPIServerGoingAway(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("fault")
	mkNamespace(t, c, ns)
	inv, _ := ParseInventory("f", ns)
	ctx := context.Background()
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	_, err := c.Apply(ctx, objects(t, ns, threeObjects), ApplyOptions{Namespace: ns, Inventory: &inv, Prune: true})
	if startErr := cp.StartAPIServer(); startErr != nil {
		t.Fatal(startErr)
	}
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API server at") {
		t.Fatalf("apply with the API server down: %v", err)
	}
	// A retried apply converges, with a consistent inventory.
	var res *Result
	for i := 0; i < 50; i++ {
		if res, err = c.Apply(ctx, objects(t, ns, threeObjects), ApplyOptions{Namespace: ns, Inventory: &inv, Prune: true}); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Count(Created)+res.Count(Unchanged) != 3 {
		t.Errorf("after restart:\n%s", actions(res))
	}
	parent, err := get(t, c, "v1", "Secret", ns, "f")
	if err != nil || parent.GetAnnotations()[annotationGroupKinds] != "ConfigMap,Service" {
		t.Errorf("inventory after restart: %v %v", err, parent)
	}
}

func mkNamespace(t *testing.T, c *Client, ns string) {
	t.Helper()
	if _, err := c.Apply(context.Background(), objects(t, ns, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n"), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestReapplyRepairsDriftAndRemovesDroppedFields(t *testing.T) {
	c := newClient(t)
	ns := testenvNS("drift")
	mkNamespace(t, c, ns)
	ctx := context.Background()
	set := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {keep: \"1\", drop: \"1\"}\n"
	if _, err := c.Apply(ctx, objects(t, ns, set), ApplyOptions{Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	// Someone edits a field Sluice set, with another field manager.
	live, _ := get(t, c, "v1", "ConfigMap", ns, "a")
	unstructured.SetNestedField(live.Object, "edited", "data", "keep")
	if err := c.client.Update(ctx, live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	res, err := c.Apply(ctx, objects(t, ns, set), ApplyOptions{Namespace: ns})
	if err != nil || actions(res) != "configmap/a configured" {
		t.Fatalf("reapply after drift: %v\n%s", err, actions(res))
	}
	live, _ = get(t, c, "v1", "ConfigMap", ns, "a")
	if v, _, _ := unstructured.NestedString(live.Object, "data", "keep"); v != "1" {
		t.Errorf("drift not repaired: keep = %q", v)
	}
	// The set stops setting a field: it goes.
	res, err = c.Apply(ctx, objects(t, ns, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {keep: \"1\"}\n"), ApplyOptions{Namespace: ns})
	if err != nil || actions(res) != "configmap/a configured" {
		t.Fatalf("reapply without a field: %v\n%s", err, actions(res))
	}
	live, _ = get(t, c, "v1", "ConfigMap", ns, "a")
	if _, found, _ := unstructured.NestedString(live.Object, "data", "drop"); found {
		t.Errorf("a field the set dropped survived: %v", live.Object["data"])
	}
}
