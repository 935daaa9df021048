package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/hooks"
	"sluice.dev/sluice/internal/owner"
	"sluice.dev/sluice/internal/pin"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/synckey"
)

type renderCmdFlags struct {
	pin       bool
	render    renderFlags
	limits    limitFlags
	kube      kubeFlags
	asOwner   string
	deployer  string
	helmTests bool
	syncKey   string
	sync      string
}

func newRenderCmd(s Streams) *cobra.Command {
	f := &renderCmdFlags{}
	cmd := &cobra.Command{
		Use:   "render PATH",
		Short: "Render one local directory (kustomization, chart or plain YAML) to stdout",
		Example: `  sluice render deploy/overlays/dev
  sluice render charts/shop --pin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := renderLocal(cmd, args[0], f)
			if err != nil {
				return exit(2, err)
			}
			_, err = s.Out.Write(out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.pin, "pin", false, "pin every image to the digest its tag points at")
	fl.StringArrayVar(&f.render.insecure, "insecure-registry", nil, "registry host reached over plain HTTP (repeatable)")
	fl.BoolVar(&f.render.includeCRDs, "include-crds", false, "include a chart's CRDs (crds/) in the output, as helm template --include-crds")
	fl.StringVar(&f.deployer, "deployer", "", "render a chart as this tool would deploy it (flux, argocd or kubectl): its tests left out, its hooks as the tool runs them (said on stderr), its generated values from the sync key; without it, exactly as helm template prints it")
	fl.BoolVar(&f.helmTests, "helm-tests", false, "with --deployer, keep a chart's test hooks")
	fl.StringVar(&f.syncKey, "sync-key", "", "with --deployer, the sync key the chart's generated values derive from (default: $SLUICE_SYNC_KEY)")
	fl.StringVar(&f.sync, "sync", "", "with --deployer, the ManifestSync whose generated values to give (default: the release name)")
	fl.StringVar(&f.asOwner, "as-owner", "", "render as this Flux Kustomization ([Kustomization/]NAMESPACE/NAME) or Argo CD Application (Application/NAMESPACE/NAME) of the cluster applies PATH (postBuild substitution, decryption, targetNamespace, patches...); auto: the one whose source and path are PATH's")
	f.kube.addConnection(fl)
	f.render.add(fl, false)
	f.limits.add(fl)
	return cmd
}

// renderLocal renders a directory, pinning its images if asked, and
// returns it as YAML documents: for a kustomization without --pin,
// exactly what `kustomize build` prints.
func renderLocal(cmd *cobra.Command, dir string, f *renderCmdFlags) ([]byte, error) {
	ro, err := f.render.options(nil, &f.limits)
	if err != nil {
		return nil, err
	}
	if f.asOwner != "" && f.asOwner != owner.None {
		c, err := f.kube.connect()
		if err != nil {
			return nil, err
		}
		res, _, err := owner.Render(cmd.Context(), c, dir, f.asOwner, ro)
		if err != nil {
			return nil, err
		}
		return pinned(cmd, f, ro, res)
	}
	if f.deployer != "" {
		return forDeployer(cmd, dir, f, ro)
	}
	res, _, err := render.Local(cmd.Context(), dir, ro)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	return pinned(cmd, f, ro, res)
}

// forDeployer renders dir as the tool --deployer names would deploy it.
func forDeployer(cmd *cobra.Command, dir string, f *renderCmdFlags, ro render.Options) ([]byte, error) {
	switch f.deployer {
	case v1alpha1.DeployerFlux, v1alpha1.DeployerArgoCD, v1alpha1.DeployerKubectl:
	default:
		return nil, fmt.Errorf("--deployer %q: expected flux, argocd or kubectl", f.deployer)
	}
	key, err := synckey.Load(f.syncKey, os.Getenv)
	if err != nil {
		return nil, err
	}
	sync := f.sync
	if sync == "" {
		sync = ro.ReleaseName
	}
	if sync == "" {
		sync = filepath.Base(filepath.Clean(dir))
	}
	out, err := deploy.RenderFor(cmd.Context(), dir, ro, deploy.ForOptions{
		Hooks: hooks.Options{Tool: f.deployer, HelmTests: f.helmTests, Name: sync}, Key: key, Sync: sync,
		KeyMissing: "the chart generates values, which a deployer gets the same at every render from the sync key: pass it with --sync-key FILE or $SLUICE_SYNC_KEY",
	})
	if err != nil {
		return nil, err
	}
	for _, w := range out.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	return pinned(cmd, f, ro, out.Render)
}

// pinned pins a render's images if asked, and returns it as YAML
// documents.
func pinned(cmd *cobra.Command, f *renderCmdFlags, ro render.Options, res *render.Result) ([]byte, error) {
	if f.pin {
		nodes, err := res.Nodes()
		if err != nil {
			return nil, err
		}
		p := &pin.Pinner{Registry: ro.Charts.Registry}
		if _, err := p.Pin(cmd.Context(), nodes, []v1alpha1.ImageRule{{Name: "*", Strategy: v1alpha1.StrategyMutableTag}}); err != nil {
			return nil, err
		}
		res = &render.Result{Objects: nodes}
	}
	return res.YAML()
}
