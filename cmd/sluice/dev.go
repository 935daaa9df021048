package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/devcluster"
)

func newDevCmd(s Streams) *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Tools for trying Sluice on this machine"}
	var assets string
	var noCRDs bool
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local Kubernetes API server (with the Flux and Argo CD CRDs) until Ctrl+C",
		Long: `Start a real kube-apiserver and etcd on this machine (built from the Go module
proxy on first use, which takes about 10 minutes), print the kubeconfig to
use with sluice apply, diff and run, and stop it on Ctrl+C. There are no
nodes: objects are stored and validated, nothing runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(s.Err, "starting the control plane...")
			c, err := devcluster.Start(cmd.Context(), devcluster.Options{Assets: assets, WithoutCRDs: noCRDs, Build: true})
			if err != nil {
				return exit(2, err)
			}
			defer c.Stop()
			fmt.Fprintf(s.Out, "API server: %s\nkubeconfig: %s\n\n  export KUBECONFIG=%s\n\nCtrl+C stops it.\n", c.Config.Host, c.Kubeconfig, c.Kubeconfig)
			<-cmd.Context().Done()
			fmt.Fprintln(s.Err, "stopping...")
			return nil
		},
	}
	cluster.Flags().StringVar(&assets, "assets", "", "directory holding kube-apiserver and etcd (default: build them into bin/ of the Sluice source tree)")
	cluster.Flags().BoolVar(&noCRDs, "without-crds", false, "do not install the Flux and Argo CD CRDs")
	dev.AddCommand(cluster)
	return dev
}
