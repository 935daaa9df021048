package main

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/dashboard"
	"sluice.dev/sluice/internal/preview"
)

func newDashboardCmd(s Streams) *cobra.Command {
	var kube kubeFlags
	var eng engineFlags
	var addr, namespace string
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the dashboard on localhost, against the current kubeconfig context",
		Long: `Serve Sluice's dashboard on this machine, as kubectl proxy serves the API:
every ManifestSync with its state, source and destination commits and
pinned images, filtered and paged on the server; each sync's page with its
chain from source to digests drawn, its takeover lock and conditions, what
its next hydration would change (a dry run, on demand), its provenance and
the destination commits that touched its folder; takeovers; every live
session (sluice run) with what it changed, to stop or clean up; Images and
the syncs that pin them. Pages update as the cluster changes, without
reloading.

It reads and acts on the cluster as the kubeconfig's identity: it shows and
does what that identity may, nothing more. Repositories are read with your
own git credentials, as sluice hydrate reads them. Ctrl+C stops it.`,
		Example: `  sluice dashboard                      # http://127.0.0.1:8088/
  sluice dashboard -n team-a --addr 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cluster.RESTConfig(cluster.ConnectOptions{Kubeconfig: kube.kubeconfig, Context: kube.context})
			if err != nil {
				return exit(2, err)
			}
			// The watches' own logs would go to stderr unasked.
			ctrllog.SetLogger(logr.Discard())
			_, _, h, err := eng.engines(s)
			if err != nil {
				return exit(2, err)
			}
			// A person's own dashboard reads their repositories with their
			// own credentials, as sluice hydrate does, and may read local
			// paths (their disk).
			pv := &preview.Previewer{Hydrate: h, AllowLocal: true, OwnCredentials: true}
			srv, err := dashboard.New(cmd.Context(), cfg, dashboard.Options{Namespace: namespace, ReadOnly: readOnly, Preview: pv})
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
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "offer and accept no action (stopping sessions, releasing locks)")
	eng.addCache(cmd.Flags())
	return cmd
}
