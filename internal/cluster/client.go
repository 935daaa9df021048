package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// FieldManager is the server-side apply field manager of every change
// Sluice makes.
const FieldManager = "sluice"

// Client applies to one cluster.
type Client struct {
	config *rest.Config
	client client.Client
	mapper meta.RESTMapper
	rm     *ssa.ResourceManager
	// Namespace is the namespace of the kubeconfig context ("default" when
	// it names none).
	Namespace string
	// Context is the kubeconfig context used ("" for a bare REST config).
	Context string
}

// ConnectOptions say which cluster to reach, as kubectl's flags do.
type ConnectOptions struct {
	// Kubeconfig is a kubeconfig file; empty follows $KUBECONFIG and
	// ~/.kube/config.
	Kubeconfig string
	// Context is a context of the kubeconfig; empty is its current one.
	Context string
}

// RESTConfig is the configuration of the cluster a kubeconfig names, or,
// with no kubeconfig at all, of the cluster this pod runs in.
func RESTConfig(o ConnectOptions) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// Connect reaches the cluster a kubeconfig names.
func Connect(o ConnectOptions) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	c.Namespace = ns
	c.Context = o.Context
	if c.Context == "" {
		if raw, err := cc.RawConfig(); err == nil {
			c.Context = raw.CurrentContext
		}
	}
	return c, nil
}

// localContexts are the prefixes of the context names that local cluster
// tools (kind, k3d, minikube, Docker Desktop, Rancher Desktop) write.
var localContexts = []string{"kind-", "k3d-", "minikube", "docker-desktop", "docker-for-desktop", "rancher-desktop", "colima", "orbstack"}

// Local reports whether the cluster looks like one on this machine: a
// local tool's context name, or an API server on a loopback address.
func (c *Client) Local() bool {
	for _, p := range localContexts {
		if strings.HasPrefix(c.Context, p) {
			return true
		}
	}
	u, err := url.Parse(c.config.Host)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// New returns a Client for a REST config.
func New(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	// Applying a set is many small requests at once: client-go's default
	// rate limit (5 per second) would make a 60-object apply take seconds.
	cfg.QPS, cfg.Burst = 200, 400
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return nil, reachable(cfg, err)
	}
	cl, err := client.New(cfg, client.Options{HTTPClient: hc, Mapper: mapper})
	if err != nil {
		return nil, reachable(cfg, err)
	}
	rm := ssa.NewResourceManager(cl, nil, ssa.Owner{Field: FieldManager, Group: "sluice.dev"})
	rm.SetConcurrency(16)
	return &Client{config: cfg, client: cl, mapper: mapper, rm: rm, Namespace: "default"}, nil
}

// Warm asks the API server, in the background, what a first apply will
// need to know anyway (the kinds it serves), so a caller that renders
// meanwhile overlaps the two.
func (c *Client) Warm() {
	go func() {
		for _, gk := range []schema.GroupKind{{Kind: "ConfigMap"}, {Group: "apps", Kind: "Deployment"}} {
			c.mapper.RESTMapping(gk)
		}
	}()
}

// Host is the API server's address.
func (c *Client) Host() string { return c.config.Host }

// Kube is the controller-runtime client underneath, for callers that read
// objects Sluice does not apply.
func (c *Client) Kube() client.Client { return c.client }

// Mapper maps kinds to resources.
func (c *Client) Mapper() meta.RESTMapper { return c.mapper }

// ErrUnreachable is wrapped by the errors of requests that could not reach
// the API server.
var ErrUnreachable = errors.New("cannot reach the Kubernetes API server")

// reachable turns a connection failure into an error that says which
// server could not be reached; other errors pass unchanged.
func reachable(cfg *rest.Config, err error) error {
	if err == nil || !IsUnreachable(err) || errors.Is(err, ErrUnreachable) {
		return err
	}
	return fmt.Errorf("%w at %s (is the cluster running, and is this the right kubeconfig and context?): %w", ErrUnreachable, cfg.Host, err)
}

// IsUnreachable reports whether err comes of not reaching the API server
// (refused, reset, timed out), rather than of the API server's answer.
func IsUnreachable(err error) bool {
	if errors.Is(err, ErrUnreachable) {
		return true
	}
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EHOSTUNREACH):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	case errors.As(err, &ue):
		return true
	}
	return strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no such host")
}
