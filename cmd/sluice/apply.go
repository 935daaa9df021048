package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/deploy"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/repoconfig"
)

type applyFlags struct {
	kube            kubeFlags
	render          renderFlags
	files           []string
	local           []string
	overrides       []string
	watch           bool
	interval        time.Duration
	engine          engineFlags
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
		Use:   "apply PATH | apply -f REPOCONFIG...",
		Short: "Apply a directory to a cluster, or reconcile RepoConfigs",
		Long: `Render PATH (a kustomization, a Helm chart or plain YAML) and apply it with
server-side apply (field manager "sluice"): CRDs and Namespaces first, waited
on until established, then everything else. With --inventory NAME the set is
recorded as a KEP-3659 ApplySet whose parent is the Secret NAME, and the next
apply prunes what PATH no longer has.

With -f, reconcile RepoConfigs (and any ManifestSyncs and Images in the
files) instead: each RepoConfig's repository is read at its ref, the Sluice
resources its globs and selectors find are transformed by its overrides,
then Images are built (those whose inputs were built before are only
tagged) and ManifestSyncs hydrated with the fresh digests. --watch repeats
every --interval, acting on each new commit and each moved tag.`,
		Example: `  sluice apply deploy/overlays/dev -n dev
  sluice apply deploy/overlays/dev --inventory web-dev --wait
  sluice apply -f deploy/repoconfig.yaml
  sluice apply -f deploy/repoconfig.yaml --watch --interval 1m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.output != "text" && f.output != "json" {
				return exit(2, fmt.Errorf("-o %s: must be text or json", f.output))
			}
			if len(f.files) > 0 {
				if len(args) > 0 {
					return exit(2, fmt.Errorf("give PATH (apply to a cluster) or -f (reconcile RepoConfigs), not both"))
				}
				return f.reconcile(cmd, s)
			}
			if len(args) != 1 {
				return exit(2, fmt.Errorf("PATH is required (or -f REPOCONFIG)"))
			}
			c, inv, ro, err := f.kube.target(f.inventory, &f.render, &f.engine.limits)
			if err != nil {
				return exit(2, err)
			}
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
	f.render.add(fl, true)
	fl.StringVar(&f.inventory, "inventory", "", "record the set as an ApplySet whose parent is this Secret (or configmap/NAME), to prune later")
	fl.BoolVar(&f.prune, "prune", true, "with --inventory, delete what the set no longer has")
	fl.BoolVar(&f.wait, "wait", false, "wait until every object is ready (kstatus)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for definitions and, with --wait, readiness")
	fl.BoolVar(&f.continueOnError, "continue-on-error", false, "apply what can be applied when some objects fail")
	fl.BoolVar(&f.force, "force", false, "recreate objects whose change touches an immutable field")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "reconcile the RepoConfigs (and ManifestSyncs and Images) in this file or directory (repeatable)")
	fl.StringArrayVar(&f.local, "local", nil, "with -f: read a repository from a working tree: REPO=PATH, or PATH (repeatable)")
	fl.StringArrayVar(&f.overrides, "override-repo", nil, "with -f: FROM=TO repository override (repeatable)")
	fl.BoolVar(&f.watch, "watch", false, "with -f: reconcile again every --interval until interrupted")
	fl.DurationVar(&f.interval, "interval", time.Minute, "with --watch: how often")
	f.engine.add(fl)
	return cmd
}

// reconcile is apply -f: RepoConfigs reconciled once, or every interval.
func (f *applyFlags) reconcile(cmd *cobra.Command, s Streams) error {
	var extra override.Set
	for _, l := range f.local {
		r, err := override.Local(l, "")
		if err != nil {
			return exit(2, err)
		}
		extra.Repos = append(extra.Repos, r)
	}
	for _, spec := range f.overrides {
		r, err := override.Parse(spec, "")
		if err != nil {
			return exit(2, err)
		}
		extra.Repos = append(extra.Repos, r)
	}
	once := func() (*repoconfig.Report, error) {
		// Fresh engines each round: a run remembers the refs and tags it
		// resolved, and a new round must see them move.
		cache, b, h, err := f.engine.engines(s)
		if err != nil {
			return nil, exit(2, err)
		}
		defer closeSandbox(h.Sandbox)
		l, err := repoconfig.Load(cmd.Context(), cache, f.files, extra)
		if err != nil {
			return nil, exit(2, err)
		}
		rep, err := repoconfig.Reconcile(cmd.Context(), l, repoconfig.Options{Hydrate: h, Builder: b})
		if err != nil {
			return nil, exit(2, err)
		}
		return rep, nil
	}
	if !f.watch {
		rep, err := once()
		if err != nil {
			return err
		}
		return printReconcile(s, f.output, rep)
	}
	for {
		rep, err := once()
		switch {
		case err != nil:
			fmt.Fprintf(s.Err, "%s reconcile failed: %v\n", time.Now().Format("15:04:05"), err)
		case rep.Changed() || rep.Err() != nil:
			printReconcile(s, f.output, rep)
		default:
			fmt.Fprintf(s.Err, "%s nothing changed\n", time.Now().Format("15:04:05"))
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(f.interval):
		}
	}
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
