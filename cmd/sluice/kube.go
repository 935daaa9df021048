package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"sluice.dev/sluice/internal/cluster"
)

// kubeFlags are kubectl's flags for reaching a cluster.
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

func (k *kubeFlags) add(fl *pflag.FlagSet) {
	fl.StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&k.context, "context", "", "the kubeconfig context to use")
	fl.StringVarP(&k.namespace, "namespace", "n", "", "namespace for namespaced objects that have none (default: the context's)")
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
