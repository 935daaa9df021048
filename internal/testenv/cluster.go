package testenv

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/devcluster"
)

// ControlPlane is a real kube-apiserver and etcd, one per test package,
// started from TestMain and shared by the package's tests (each in its own
// namespaces).
type ControlPlane struct {
	*devcluster.Cluster
}

var nsCounter atomic.Int64

// StartControlPlane starts a control plane with the Flux and Argo CD CRDs.
// It never builds kube-apiserver and etcd (that takes longer than a
// test's timeout): `make tools` does, and without them this fails saying
// so.
func StartControlPlane() (*ControlPlane, error) {
	c, err := devcluster.Start(context.Background(), devcluster.Options{})
	if err != nil {
		return nil, err
	}
	return &ControlPlane{Cluster: c}, nil
}

// RunWithControlPlane is a TestMain body: it starts a control plane, runs
// the tests, stops it, and exits.
func RunWithControlPlane(m interface{ Run() int }, cp **ControlPlane) {
	c, err := StartControlPlane()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test control plane:", err)
		os.Exit(1)
	}
	// sluice-system exists from the start, as an administrator would have
	// created it: the last session out leaves it, instead of deleting it
	// and making the next test's session wait for the namespace
	// controller. The test of that removal deletes it first.
	if err := c.createNamespace("sluice-system"); err != nil {
		fmt.Fprintln(os.Stderr, "creating namespace sluice-system:", err)
		c.Stop()
		os.Exit(1)
	}
	*cp = c
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// Namespace returns a namespace name unique to this test process.
func Namespace(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid()%10000, nsCounter.Add(1))
}

func (c *ControlPlane) createNamespace(name string) error {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	err = cl.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
