package session

import (
	"context"
	"fmt"
	"reflect"
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

func newClient(t *testing.T) *cluster.Client {
	t.Helper()
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: cp.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parse reads multi-document YAML, %[1]s standing for ns.
func parse(t *testing.T, ns, docs string) []cluster.Object {
	t.Helper()
	var out []cluster.Object
	for i, doc := range strings.Split(strings.ReplaceAll(docs, "%[1]s", ns), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, cluster.Object{Unstructured: u, Origin: fmt.Sprintf("src.yaml:%d", i+1)})
	}
	return out
}

// applyAs server-side applies objects as another tool would (Flux's
// kustomize-controller, say).
func applyAs(t *testing.T, c *cluster.Client, manager string, objs []cluster.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Kube().Patch(context.Background(), o.Unstructured, client.Apply, client.FieldOwner(manager), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s as %s: %v", cluster.RefOf(o.Unstructured), manager, err)
		}
	}
}

func get(t *testing.T, c *cluster.Client, apiVersion, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if err := c.Kube().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil
	}
	return u
}

// handBack are the annotations a stop adds to ask GitOps tools to
// reconcile now: a request by design, a timestamp by nature.
var handBack = []string{annotationFluxReconcile, annotationArgoRefresh}

func dump(t *testing.T, namespaces []string, clusterScoped ...string) map[string]map[string]any {
	t.Helper()
	d, err := testenv.Dump(cp.Config, namespaces, clusterScoped, handBack...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sameDump fails the test with the differences between two dumps.
func sameDump(t *testing.T, before, after map[string]map[string]any) {
	t.Helper()
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
	for _, k := range keys {
		b, a := before[k], after[k]
		switch {
		case a == nil:
			t.Errorf("%s: gone after the session", k)
		case b == nil:
			y, _ := yaml.Marshal(a)
			t.Errorf("%s: left behind by the session:\n%s", k, y)
		case !reflect.DeepEqual(a, b):
			yb, _ := yaml.Marshal(b)
			ya, _ := yaml.Marshal(a)
			t.Errorf("%s changed:\nbefore:\n%s\nafter:\n%s", k, yb, ya)
		}
	}
}

func actions(res *cluster.Result) string {
	var out []string
	for _, c := range res.Changes {
		out = append(out, c.Ref.String()+" "+string(c.Action))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func startSession(t *testing.T, c *cluster.Client, o Options) *Session {
	t.Helper()
	if o.Name == "" {
		o.Name = strings.TrimPrefix(testenv.Namespace("s"), "s-")
		o.Name = "s" + strings.ReplaceAll(o.Name, "-", "")
	}
	o.RenewInterval = 200 * time.Millisecond
	s, err := Start(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// staleSoon waits until a session whose heartbeat stopped is stale (its
// Lease expired), as `sluice run list` would show it.
func staleSoon(t *testing.T, c *cluster.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		in, err := Get(context.Background(), c, name)
		if err == nil && in.State == StateStale {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s is not stale: %+v, %v", name, in, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heldNow is held against the owner as it is now.
func heldNow(ctx context.Context, s *Session, o Owner) (string, error) {
	u, err := getRef(ctx, s.c.Kube(), o.Ref)
	if err != nil {
		return "", err
	}
	return held(ctx, s, o, u)
}
