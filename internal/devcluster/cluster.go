package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"sluice.dev/sluice/config/crd"
)

// Options say what to start.
type Options struct {
	// Assets is the directory of kube-apiserver and etcd; empty finds them
	// with Assets (building them if Build is set).
	Assets string
	// Build builds kube-apiserver and etcd when they are missing (about 10
	// minutes): for a person's `sluice dev cluster`, never in a test's
	// time, where their absence is an error saying how to build them.
	Build bool
	// WithoutCRDs leaves the CRDs out: Sluice's own, Flux's and Argo CD's.
	WithoutCRDs bool
	// Dir receives the kubeconfig; empty makes a temporary directory.
	Dir string
}

// Cluster is a running control plane.
type Cluster struct {
	env *envtest.Environment
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for kubectl and sluice.
	Kubeconfig string
	certDir    string
}

// Start starts a control plane and waits until it serves, with the CRDs
// installed and established.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Assets == "" {
		dir, err := Assets(ctx, "", o.Build)
		if err != nil {
			return nil, err
		}
		o.Assets = dir
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    o.Assets,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
		ErrorIfCRDPathMissing:    true,
	}
	// A certificate directory of our own survives an API server restart
	// (envtest replaces a random one, and with it the CA clients trust).
	certDir, err := os.MkdirTemp("", "sluice-apiserver-")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	// Watches (a controller's informers) end when the API server stops,
	// as they do in a real cluster's rolling update; without a grace
	// period it waits on them for its whole shutdown timeout.
	env.ControlPlane.GetAPIServer().Configure().Set("shutdown-watch-termination-grace-period", "2s")
	if !o.WithoutCRDs {
		dirs, err := CRDs(ctx)
		if err != nil {
			return nil, err
		}
		env.CRDDirectoryPaths = dirs
		if env.CRDs, err = crd.Objects(); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		env.Stop()
		os.RemoveAll(certDir)
		return nil, fmt.Errorf("starting the control plane from %s: %w", o.Assets, err)
	}
	c := &Cluster{env: env, Config: cfg, certDir: certDir}
	dir := o.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sluice-cluster-"); err != nil {
			c.Stop()
			return nil, err
		}
	}
	user, err := env.AddUser(envtest.User{Name: "sluice-admin", Groups: []string{"system:masters"}}, nil)
	if err == nil {
		var data []byte
		if data, err = user.KubeConfig(); err == nil {
			c.Kubeconfig = filepath.Join(dir, "kubeconfig")
			err = os.WriteFile(c.Kubeconfig, data, 0o600)
		}
	}
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("writing a kubeconfig: %w", err)
	}
	return c, nil
}

// Stop stops the control plane and removes its data.
func (c *Cluster) Stop() error {
	err := c.env.Stop()
	os.RemoveAll(c.certDir)
	return err
}

// StopAPIServer stops the API server alone (etcd keeps the data), to test
// what happens when the cluster goes away.
func (c *Cluster) StopAPIServer() error { return c.env.ControlPlane.APIServer.Stop() }

// StartAPIServer starts a stopped API server again, on the same address.
func (c *Cluster) StartAPIServer() error { return c.env.ControlPlane.APIServer.Start() }
