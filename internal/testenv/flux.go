package testenv

import (
	"context"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/devcluster"
)

// Flux is the real Flux controllers (source-controller,
// kustomize-controller, helm-controller) running out of cluster against a
// control plane, as processes of their own, watching one namespace: the
// test's, where its GitRepositories, Kustomizations and HelmReleases are.
// Objects they apply may go to any namespace.
type Flux struct {
	// Namespace is the namespace the controllers watch.
	Namespace string
	*devcluster.Flux
}

// StartFlux starts the controllers; they stop when the test ends.
func StartFlux(t TB, kubeconfig, namespace string) *Flux {
	t.Helper()
	return StartFluxLogging(t, kubeconfig, namespace, "debug")
}

// StartFluxLogging is StartFlux with the controllers' --log-level (a
// benchmark's "info": debug logs cost a controller CPU of their own). The
// controllers are the ones `make tools` builds; a test never builds them.
func StartFluxLogging(t TB, kubeconfig, namespace, level string) *Flux {
	t.Helper()
	f, err := devcluster.StartFlux(context.Background(), devcluster.FluxOptions{
		Kubeconfig: kubeconfig, Dir: t.TempDir(), Namespace: namespace, LogLevel: level,
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(f.Stop)
	return &Flux{Namespace: namespace, Flux: f}
}

// WaitApplied waits until the Kustomization name, in the controllers'
// namespace, has applied revision ("main@sha1:…") and is Ready, and
// returns it; past a minute it fails the test with its conditions and
// the controllers' logs.
func (f *Flux) WaitApplied(t TB, c client.Client, name, revision string) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
		u.SetKind("Kustomization")
		err := c.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: name}, u)
		got, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		ready := false
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				ready = true
			}
		}
		if err == nil && got == revision && ready {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kustomization %s/%s has not applied %s (applied %q, %v): %v\n%s", f.Namespace, name, revision, got, err, conds, f.Logs(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freeAddr(t TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
