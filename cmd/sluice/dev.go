package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/controller"
	"sluice.dev/sluice/internal/devcluster"
)

func newDevCmd(s Streams) *cobra.Command {
	dev := &cobra.Command{Use: "dev", Short: "Tools for trying Sluice on this machine"}
	var assets string
	var noCRDs, serve, flux bool
	var gitDir, dir string
	var files []string
	var eng engineFlags
	cluster := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local Kubernetes API server (with the Flux and Argo CD CRDs) until Ctrl+C",
		Long: `Start a real kube-apiserver, etcd and kube-controller-manager on this machine
(built from the Go module proxy on first use, which takes about 12
minutes), print the kubeconfig to use with sluice apply, diff and run, and
stop it on Ctrl+C. There are no nodes: objects are stored and validated,
deleted namespaces go and owner references are garbage-collected, but no
pod runs.

With --serve, the controller (sluice serve) runs against it too, allowed to
read repositories on this machine's disk, and the resources of -f (the
quickstart's syncs by default) are applied to the default namespace: watch
them with kubectl get manifestsyncs -w.

With --flux, the real Flux source-, kustomize- and helm-controller run
against it too (built into bin/ on first use, about 3 minutes each;
runtime namespace flux-system, every namespace watched), with a git server
on loopback for their GitRepositories: a push to URL/NAME.git creates the
repository. A cluster Flux owns, to try sluice run against.`,
		Example: `  sluice dev cluster
  sluice dev cluster --serve                      # the quickstart, continuously
  sluice dev cluster --serve -f my/syncs/
  sluice dev cluster --flux                       # Flux's controllers and a git server too
  export KUBECONFIG=$PWD/c/kubeconfig; sluice dev cluster --dir c &   # kubectl reaches this cluster or none`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir != "" {
				var err error
				if dir, err = filepath.Abs(dir); err != nil {
					return exit(2, err)
				}
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return exit(2, err)
				}
				// The kubeconfig exists while this cluster runs, and only
				// then: one left by an earlier run names a dead address.
				os.Remove(filepath.Join(dir, "kubeconfig"))
				defer os.Remove(filepath.Join(dir, "kubeconfig"))
			}
			fmt.Fprintln(s.Err, "starting the control plane...")
			c, err := devcluster.Start(cmd.Context(), devcluster.Options{Assets: assets, WithoutCRDs: noCRDs, Build: true, Flux: flux, Dir: dir, GitDir: gitDir})
			if err != nil {
				return exit(2, err)
			}
			defer c.Stop()
			fmt.Fprintf(s.Out, "API server: %s\nkubeconfig: %s\n", c.Config.Host, c.Kubeconfig)
			if c.Git != nil {
				fmt.Fprintf(s.Out, "git server: %s\nFlux: %s, runtime namespace flux-system, logs in %s\n  (repositories in %s; git push %s/NAME.git creates NAME)\n",
					c.Git.URL, strings.Join(devcluster.FluxControllers, ", "), filepath.Dir(c.Kubeconfig), c.Git.Root, c.Git.URL)
			}
			fmt.Fprintf(s.Out, "\n  export KUBECONFIG=%s\n\n", c.Kubeconfig)
			if serve {
				if err := serveDev(cmd.Context(), s, c.Config, files, &eng); err != nil {
					return exit(1, err)
				}
			}
			fmt.Fprintln(s.Out, "Ctrl+C stops it.")
			<-cmd.Context().Done()
			fmt.Fprintln(s.Err, "stopping...")
			return nil
		},
	}
	cluster.Flags().StringVar(&assets, "assets", "", "directory holding kube-apiserver, etcd and kube-controller-manager (default: build them into bin/ of the Sluice source tree)")
	cluster.Flags().BoolVar(&noCRDs, "without-crds", false, "do not install the Flux and Argo CD CRDs")
	cluster.Flags().BoolVar(&flux, "flux", false, "run the Flux controllers against the cluster too, and a git server for them")
	cluster.Flags().StringVar(&dir, "dir", "", "directory the kubeconfig is written to, once the API server answers, with the logs (default: a new temporary one)")
	cluster.Flags().StringVar(&gitDir, "git-dir", "", "directory of the --flux git server's bare repositories (default: beside the kubeconfig)")
	cluster.Flags().BoolVar(&serve, "serve", false, "run the controller against the cluster too, with the resources of -f")
	cluster.Flags().StringArrayVarP(&files, "filename", "f", []string{"examples/quickstart/syncs"}, "files or directories of Sluice resources to apply with --serve")
	eng.addCache(cluster.Flags())
	dev.AddCommand(cluster)

	var regAddr string
	reg := &cobra.Command{
		Use:   "registry",
		Short: "Run an OCI registry on this machine, in memory, until Ctrl+C",
		Long: `Start an OCI registry on loopback, its content in memory, and print its
host:port: build images into it with sluice build (no Docker), and pin
them from it with a sync's image rules, as from a team's registry.
Sluice reaches loopback registries over plain HTTP. What it holds is gone
when it stops.`,
		Example: `  sluice dev registry                         # a free port, printed as "registry: 127.0.0.1:PORT"
  sluice dev registry --addr 127.0.0.1:5001`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := devcluster.ServeRegistry(regAddr)
			if err != nil {
				return exit(2, err)
			}
			defer r.Close()
			fmt.Fprintf(s.Out, "registry: %s\nCtrl+C stops it.\n", r.Host)
			<-cmd.Context().Done()
			return nil
		},
	}
	reg.Flags().StringVar(&regAddr, "addr", "127.0.0.1:0", "the loopback address to listen on (port 0: any free one)")
	dev.AddCommand(reg)
	return dev
}

// serveDev starts the controller against a dev cluster, allowed to read
// this machine's repositories, and applies the resources of files.
func serveDev(ctx context.Context, s Streams, cfg *rest.Config, files []string, eng *engineFlags) error {
	set, err := config.Load(files...)
	if err != nil {
		return err
	}
	dir, err := eng.dir()
	if err != nil {
		return err
	}
	lim, err := eng.limits.limits()
	if err != nil {
		return err
	}
	sb, err := eng.sandbox(nil)
	if err != nil {
		return err
	}
	ready := make(chan controller.Addrs, 1)
	failed := make(chan error, 1)
	go func() {
		// The controller outlives this function (until ctx ends): so
		// does its sandbox.
		defer closeSandbox(sb)
		failed <- controller.Run(ctx, controller.Options{
			Config: cfg, CacheDir: filepath.Join(dir, "dev-controller"), AllowLocalRepos: true, Insecure: eng.insecure, Limits: lim,
			// This machine's own: its loopback servers are the point.
			AllowRemoteHosts: append([]string{"127.0.0.0/8", "::1", "localhost"}, eng.limits.allowRemote...), NoRemoteBases: eng.limits.noRemoteBases,
			Sandbox:     sb,
			MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0", HookAddr: "127.0.0.1:0",
			Log:   slog.New(slog.NewTextHandler(s.Err, &slog.HandlerOptions{Level: slog.LevelInfo})),
			Ready: func(a controller.Addrs) { ready <- a },
		})
	}()
	var a controller.Addrs
	select {
	case a = <-ready:
	case err := <-failed:
		return fmt.Errorf("the controller: %w", err)
	}
	names, err := controller.ApplyResources(ctx, cfg, "default", set)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "controller: webhooks on http://%s/hook/NAMESPACE/NAME, metrics on http://%s/metrics\napplied to namespace default: %s\n\n  kubectl get manifestsyncs -w\n\n", a.Hook, a.Metrics, strings.Join(names, ", "))
	return nil
}
