package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
)

type applyFlags struct {
	kube            kubeFlags
	inventory       string
	prune           bool
	wait            bool
	timeout         time.Duration
	continueOnError bool
	force           bool
	output          string
}

func newApplyCmd(s Streams) *cobra.Command {
	f := &applyFlags{}
	cmd := &cobra.Command{
		Use:   "apply PATH",
		Short: "Render a directory and apply it to a cluster with server-side apply",
		Long: `Render PATH (a kustomization, a Helm chart or plain YAML) and apply it with
server-side apply (field manager "sluice"): CRDs and Namespaces first, waited
on until established, then everything else. With --inventory NAME the set is
recorded as a KEP-3659 ApplySet whose parent is the Secret NAME, and the next
apply prunes what PATH no longer has.`,
		Example: `  sluice apply deploy/overlays/dev -n dev
  sluice apply deploy/overlays/dev --inventory web-dev --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "text" && f.output != "json" {
				return exit(2, fmt.Errorf("-o %s: must be text or json", f.output))
			}
			c, err := f.kube.connect()
			if err != nil {
				return exit(2, err)
			}
			inv, err := f.kube.inventory(c, f.inventory)
			if err != nil {
				return exit(2, err)
			}
			ro := render.Options{Charts: &render.Charts{Registry: registry.New()}, CacheDir: renderCacheDir()}
			res, err := deploy.Apply(cmd.Context(), c, args[0], ro, cluster.ApplyOptions{
				Inventory: inv, Prune: f.prune && inv != nil, Wait: f.wait, Timeout: f.timeout,
				ContinueOnError: f.continueOnError, Force: f.force,
			})
			if res != nil {
				if perr := printResult(s.Out, f.output, res); perr != nil {
					return perr
				}
			}
			if err != nil {
				return exit(1, err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.kube.add(fl)
	fl.StringVar(&f.inventory, "inventory", "", "record the set as an ApplySet whose parent is this Secret (or configmap/NAME), to prune later")
	fl.BoolVar(&f.prune, "prune", true, "with --inventory, delete what the set no longer has")
	fl.BoolVar(&f.wait, "wait", false, "wait until every object is ready (kstatus)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for definitions and, with --wait, readiness")
	fl.BoolVar(&f.continueOnError, "continue-on-error", false, "apply what can be applied when some objects fail")
	fl.BoolVar(&f.force, "force", false, "recreate objects whose change touches an immutable field")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	return cmd
}

// printResult prints one line per object, as kubectl does
// ("deployment.apps/web configured"), or the result as JSON.
func printResult(w io.Writer, format string, res *cluster.Result) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	for _, c := range res.Changes {
		line := fmt.Sprintf("%s %s", c.Ref, c.Action)
		if c.Error != "" {
			line += ": " + c.Error
		}
		fmt.Fprintln(w, line)
	}
	for _, r := range res.NotReady {
		fmt.Fprintf(w, "%s not ready: %s: %s\n", r.Ref, r.Status, r.Message)
	}
	return nil
}
