package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/render"
)

// kubeFlags are kubectl's flags for reaching a cluster.
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

func (k *kubeFlags) add(fl *pflag.FlagSet) {
	k.addConnection(fl)
	fl.StringVarP(&k.namespace, "namespace", "n", "", "namespace for namespaced objects that have none (default: the context's)")
}

// addConnection adds the flags that choose the cluster, without -n.
func (k *kubeFlags) addConnection(fl *pflag.FlagSet) {
	fl.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&k.context, "context", "", "the kubeconfig context to use")
}

func (k *kubeFlags) connect() (*cluster.Client, error) {
	c, err := cluster.Connect(cluster.ConnectOptions{Kubeconfig: k.kubeconfig, Context: k.context})
	if err != nil {
		return nil, err
	}
	if k.namespace != "" {
		c.Namespace = k.namespace
	}
	return c, nil
}

// renderCacheDir is where local renders are kept between runs ("" when
// there is no user cache directory).
func renderCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "sluice", "render")
}

// inventory parses --inventory, in the namespace of -n.
func (k *kubeFlags) inventory(c *cluster.Client, s string) (*cluster.Inventory, error) {
	if s == "" {
		return nil, nil
	}
	inv, err := cluster.ParseInventory(s, c.Namespace)
	if err != nil {
		return nil, fmt.Errorf("--inventory: %w", err)
	}
	return &inv, nil
}

// target connects, parses --inventory, and gives the render options of a
// local directory for that cluster: what apply and diff of PATH need.
func (k *kubeFlags) target(inventory string, rf *renderFlags, l *limitFlags) (*cluster.Client, *cluster.Inventory, render.Options, error) {
	c, err := k.connect()
	if err != nil {
		return nil, nil, render.Options{}, err
	}
	ro, err := rf.options(c, l)
	if err != nil {
		return nil, nil, ro, err
	}
	ro.CacheDir = renderCacheDir()
	inv, err := k.inventory(c, inventory)
	return c, inv, ro, err
}
