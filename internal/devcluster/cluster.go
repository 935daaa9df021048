package devcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"sluice.dev/sluice/config/crd"
)

// Options say what to start.
type Options struct {
	// Assets is the directory of kube-apiserver, etcd and
	// kube-controller-manager; empty finds them with Assets (building them
	// if Build is set).
	Assets string
	// Build builds the control plane when it is missing (about 12
	// minutes): for a person's `sluice dev cluster`, never in a test's
	// time, where their absence is an error saying how to build them.
	Build bool
	// WithoutCRDs leaves the CRDs out: Sluice's own, Flux's and Argo CD's.
	WithoutCRDs bool
	// Dir receives the kubeconfig; empty makes a temporary directory.
	Dir string
	// Flux runs the real Flux controllers against the cluster too (runtime
	// namespace flux-system, every namespace watched), and a git server on
	// loopback for their GitRepositories to read.
	Flux bool
	// GitDir holds the git server's bare repositories; empty is Dir/git.
	GitDir string
	// Controllers are kube-controller-manager's controllers besides
	// namespace and garbagecollector ("deployment", "replicaset",
	// "statefulset", "job", "ttl-after-finished"...): for a test that
	// runs pods on a kubelet of its own (testenv.Kubelet).
	Controllers []string
}

// Cluster is a running control plane.
type Cluster struct {
	env *envtest.Environment
	// Config reaches the API server as a cluster administrator.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for kubectl and sluice.
	Kubeconfig string
	certDir    string
	// controllers is kube-controller-manager, running the controllers a
	// cluster without nodes needs: namespace (a deleted namespace goes,
	// with its objects) and garbage collection (owner references).
	controllers *exec.Cmd
	stopped     chan struct{}
	// reaper kills etcd and the API server if this process dies without
	// stopping them.
	reaper func()
	// Flux and Git are the Flux controllers and their git server, with
	// Options.Flux.
	Flux *Flux
	Git  *GitServer
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
	// And etcd's data, kept in a directory of our own, survives etcd's
	// (envtest starts a stopped etcd on a new, empty one).
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(certDir, "etcd")}
	// Watches (a controller's informers) end when the API server stops,
	// as they do in a real cluster's rolling update; without a grace
	// period it waits on them for its whole shutdown timeout.
	env.ControlPlane.GetAPIServer().Configure().Set("shutdown-watch-termination-grace-period", "2s")
	// Advertised on loopback, where it serves: its OIDC discovery names
	// its keys there (a keyless signer's Fulcio fetches them), not at the
	// address of the machine's first interface, where nothing listens.
	// The kubernetes Service then has no endpoints kept (loopback cannot
	// be one): no pod runs here to reach it.
	env.ControlPlane.GetAPIServer().Configure().Set("advertise-address", "127.0.0.1").Set("endpoint-reconciler-type", "none")
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
	reaper := startReaper(certDir)
	cfg, err := env.Start()
	if err != nil {
		env.Stop()
		reaper()
		os.RemoveAll(certDir)
		return nil, fmt.Errorf("starting the control plane from %s: %w", o.Assets, err)
	}
	c := &Cluster{env: env, Config: cfg, certDir: certDir, reaper: reaper}
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
	if err := c.startControllers(filepath.Join(o.Assets, "kube-controller-manager"), dir, o.Controllers); err != nil {
		c.Stop()
		return nil, err
	}
	if o.Flux {
		if err := c.startFlux(ctx, o, dir); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// startControllers starts kube-controller-manager against the API server
// with the namespace and garbage-collector controllers (no node runs a
// pod here, so the workload controllers would only leave pending pods).
func (c *Cluster) startControllers(bin, dir string, extra []string) error {
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+c.Kubeconfig,
		"--controllers="+strings.Join(append([]string{"namespace", "garbagecollector"}, extra...), ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-namespace-syncs=4",
	)
	cmd.Stdout, cmd.Stderr = log, log
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	c.controllers, c.stopped = cmd, make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(c.stopped)
	}()
	// It may not die at once: a bad flag shows within a moment.
	select {
	case <-c.stopped:
		data, _ := os.ReadFile(log.Name())
		return fmt.Errorf("kube-controller-manager exited:\n%s", data)
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

// startFlux starts the git server and the Flux controllers, in the
// namespace a Flux bootstrap makes, flux-system.
func (c *Cluster) startFlux(ctx context.Context, o Options, dir string) error {
	gitDir := o.GitDir
	if gitDir == "" {
		gitDir = filepath.Join(dir, "git")
	}
	var err error
	if c.Git, err = ServeGit(gitDir); err != nil {
		return fmt.Errorf("starting the git server: %w", err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace flux-system: %w", err)
	}
	c.Flux, err = StartFlux(ctx, FluxOptions{Kubeconfig: c.Kubeconfig, Dir: dir, Namespace: "flux-system", WatchAll: true, Build: o.Build})
	return err
}

// Stop stops the control plane and removes its data.
func (c *Cluster) Stop() error {
	if c.Flux != nil {
		c.Flux.Stop()
	}
	if c.Git != nil {
		c.Git.Close()
	}
	if c.controllers != nil {
		c.controllers.Process.Signal(os.Interrupt)
		select {
		case <-c.stopped:
		case <-time.After(10 * time.Second):
			c.controllers.Process.Kill()
			<-c.stopped
		}
	}
	err := c.env.Stop()
	c.reaper()
	os.RemoveAll(c.certDir)
	return err
}

// StopAPIServer stops the API server alone (etcd keeps the data), to test
// what happens when the cluster goes away.
func (c *Cluster) StopAPIServer() error { return c.env.ControlPlane.APIServer.Stop() }

// StartAPIServer starts a stopped API server again, on the same address.
func (c *Cluster) StartAPIServer() error { return c.env.ControlPlane.APIServer.Start() }

// StopEtcd stops etcd alone (its data kept): the API server stays up and
// answers, but cannot read or write anything.
func (c *Cluster) StopEtcd() error { return c.env.ControlPlane.Etcd.Stop() }

// StartEtcd starts a stopped etcd again, on the same address and data.
func (c *Cluster) StartEtcd() error { return c.env.ControlPlane.Etcd.Start() }
