package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
)

type diffFlags struct {
	kube      kubeFlags
	inventory string
	output    string
}

func newDiffCmd(s Streams) *cobra.Command {
	f := &diffFlags{}
	cmd := &cobra.Command{
		Use:   "diff PATH",
		Short: "Show what `sluice apply PATH` would change, from a server-side dry run",
		Long: `Render PATH and compare it with the cluster through a server-side dry run:
each object is created, configured (with a unified diff), unchanged, or, with
--inventory, deleted. Secret values are masked.

Exit codes: 0 nothing would change, 1 something would, 2 error.`,
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
			res, err := deploy.Diff(cmd.Context(), c, args[0], ro, cluster.DiffOptions{Inventory: inv})
			if err != nil {
				return exit(2, err)
			}
			if f.output == "json" {
				if err := printResult(s.Out, "json", res); err != nil {
					return exit(2, err)
				}
			} else {
				for _, ch := range res.Changes {
					fmt.Fprintf(s.Out, "%s %s\n", ch.Ref, ch.Action)
					fmt.Fprint(s.Out, ch.Diff)
				}
			}
			if res.Changed() {
				return exit(1, nil)
			}
			return nil
		},
	}
	f.kube.add(cmd.Flags())
	cmd.Flags().StringVar(&f.inventory, "inventory", "", "the ApplySet inventory whose members the set no longer has would be deleted")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	return cmd
}
