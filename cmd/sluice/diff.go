package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/owner"
)

type diffFlags struct {
	kube      kubeFlags
	render    renderFlags
	limits    limitFlags
	inventory string
	against   string
	output    string
	asOwner   string
}

func newDiffCmd(s Streams) *cobra.Command {
	f := &diffFlags{}
	cmd := &cobra.Command{
		Use:   "diff PATH | diff --namespace A --against B",
		Short: "Show what `sluice apply PATH` would change, or how two namespaces differ",
		Long: `Render PATH and compare it with the cluster through a server-side dry run:
each object is created, configured (with a unified diff), unchanged, or, with
--inventory, deleted. Secret values are masked.

With --against, compare the objects of two namespaces instead (a version
session's namespace with the workload it runs beside): objects only in one,
and a diff of the fields of the others (status, server-set metadata and
what controllers derive left out).

Exit codes: 0 nothing would change (namespaces alike), 1 something would
(they differ), 2 error.`,
		Example: `  sluice diff deploy/overlays/dev -n dev --inventory web
  sluice diff --namespace dev --against dev-alice`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "text" && f.output != "json" {
				return exit(2, fmt.Errorf("-o %s: must be text or json", f.output))
			}
			if f.against != "" {
				if len(args) > 0 || f.kube.namespace == "" {
					return exit(2, fmt.Errorf("--against compares two namespaces: give --namespace A --against B, and no PATH"))
				}
				return f.namespaces(cmd, s)
			}
			if len(args) != 1 {
				return exit(2, fmt.Errorf("PATH is required (or --namespace A --against B)"))
			}
			c, inv, ro, err := f.kube.target(f.inventory, &f.render, &f.limits)
			if err != nil {
				return exit(2, err)
			}
			own, err := owner.Resolve(cmd.Context(), c, args[0], "", f.asOwner)
			if err != nil {
				return exit(2, err)
			}
			if own != nil {
				ro = own.Options(ro)
				fmt.Fprintf(s.Err, "rendering %s as %s applies it (--as-owner none: as it is)\n", args[0], own.Name())
			}
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
	f.render.add(cmd.Flags(), true)
	f.limits.add(cmd.Flags())
	cmd.Flags().StringVar(&f.against, "against", "", "compare the objects of --namespace with those of this namespace")
	cmd.Flags().StringVar(&f.inventory, "inventory", "", "the ApplySet inventory whose members the set no longer has would be deleted")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&f.asOwner, "as-owner", "", "render PATH as this Flux Kustomization ([Kustomization/]NAMESPACE/NAME) or Argo CD Application (Application/NAMESPACE/NAME) applies it (default: the one whose source and path are PATH's; none: as it is)")
	return cmd
}

// namespaces compares two namespaces.
func (f *diffFlags) namespaces(cmd *cobra.Command, s Streams) error {
	c, err := f.kube.connect()
	if err != nil {
		return exit(2, err)
	}
	d, err := c.DiffNamespaces(cmd.Context(), f.kube.namespace, f.against)
	if err != nil {
		return exit(2, err)
	}
	if f.output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return exit(2, err)
		}
	} else {
		for _, r := range d.OnlyInA {
			fmt.Fprintf(s.Out, "%s only in %s\n", r, d.A)
		}
		for _, r := range d.OnlyInB {
			fmt.Fprintf(s.Out, "%s only in %s\n", r, d.B)
		}
		for _, ch := range d.Different {
			fmt.Fprintf(s.Out, "%s differs\n", ch.Ref)
			fmt.Fprint(s.Out, ch.Diff)
		}
		fmt.Fprintf(s.Err, "%d only in %s, %d only in %s, %d different, %d alike\n", len(d.OnlyInA), d.A, len(d.OnlyInB), d.B, len(d.Different), d.Same)
	}
	if d.Differ() {
		return exit(1, nil)
	}
	return nil
}
