package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/dashboard"
)

func newDashboardCmd(s Streams) *cobra.Command {
	var kube kubeFlags
	var addr, namespace string
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the dashboard on localhost, against the current kubeconfig context",
		Long: `Serve Sluice's dashboard on this machine, as kubectl proxy serves the API:
every ManifestSync with its state, source and destination commits and
pinned images, filtered and paged on the server, each sync's page with its
chain from source to digests, its takeover lock and conditions. Pages
update as the cluster changes, without reloading.

It reads the cluster as the kubeconfig's identity: it shows what that
identity may list, nothing more. Ctrl+C stops it.`,
		Example: `  sluice dashboard                      # http://127.0.0.1:8088/
  sluice dashboard -n team-a --addr 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cluster.RESTConfig(cluster.ConnectOptions{Kubeconfig: kube.kubeconfig, Context: kube.context})
			if err != nil {
				return exit(2, err)
			}
			srv, err := dashboard.New(cmd.Context(), cfg, dashboard.Options{Namespace: namespace})
			if err != nil {
				return exit(1, err)
			}
			at, done, err := srv.Listen(cmd.Context(), addr)
			if err != nil {
				return exit(2, err)
			}
			fmt.Fprintf(s.Err, "dashboard on http://%s/ (Ctrl+C stops it)\n", at)
			select {
			case <-cmd.Context().Done():
				return nil
			case err := <-done:
				return exit(1, err)
			}
		},
	}
	kube.addConnection(cmd.Flags())
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8088", "the address to serve on (keep it on loopback: the dashboard reads as your identity)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "show one namespace only (default: every namespace the identity may list)")
	return cmd
}
