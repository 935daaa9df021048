package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/session"
)

func newRunListCmd(s Streams) *cobra.Command {
	var kube kubeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the live sessions on the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := kube.connect()
			if err != nil {
				return exit(2, err)
			}
			infos, err := session.List(cmd.Context(), c)
			if err != nil {
				return exit(2, err)
			}
			if output == "json" {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(infos)
			}
			if len(infos) == 0 {
				fmt.Fprintln(s.Err, "no sessions")
				return nil
			}
			tw := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tHOLDER\tSTARTED\tPATH\tBRANCH\tMODE\tHEARTBEAT\tSTATE")
			for _, in := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s\n", in.Name, in.Holder, in.Started.Local().Format(time.DateTime), in.Path, dash(in.Branch), in.Mode, in.Heartbeat, in.State)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			// What each session pauses, and how: a line per owner.
			for _, in := range infos {
				for _, p := range in.Paused {
					fmt.Fprintf(s.Out, "%s pauses %s\n", in.Name, p)
				}
			}
			return nil
		},
	}
	kube.addConnection(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newRunStopCmd(s Streams) *cobra.Command {
	var kube kubeFlags
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "stop NAME...",
		Short: "End sessions from another terminal, putting the cluster back",
		Long: `Ask a live session to end: it puts the cluster back and exits. A session
whose process is gone (or that does not answer within --wait) is restored
from its record by this command.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := kube.connect()
			if err != nil {
				return exit(2, err)
			}
			var errs []string
			for _, name := range args {
				r, err := session.StopSession(cmd.Context(), c, name, session.StopOptions{Wait: wait})
				if r != nil {
					fmt.Fprintln(s.Out, restorationLine(r))
				}
				if err != nil {
					errs = append(errs, err.Error())
				}
			}
			if len(errs) > 0 {
				return exit(1, fmt.Errorf("%s", strings.Join(errs, "\n")))
			}
			return nil
		},
	}
	kube.addConnection(cmd.Flags())
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long a live session gets to put things back itself")
	return cmd
}

func newRunCleanupCmd(s Streams) *cobra.Command {
	var kube kubeFlags
	var all bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Restore the sessions whose process is gone (--all: every session)",
		Long: `Restore every stale session (its heartbeat stopped: the process was killed,
the laptop closed) from its record: objects it created are deleted, objects
it changed get their prior state back, owners are resumed. With --all, live
sessions are asked to stop too. Running it again after an interruption
finishes the job.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := kube.connect()
			if err != nil {
				return exit(2, err)
			}
			rs, err := session.Cleanup(cmd.Context(), c, all, session.StopOptions{Wait: wait})
			for _, r := range rs {
				fmt.Fprintln(s.Out, restorationLine(r))
			}
			if len(rs) == 0 && err == nil {
				fmt.Fprintln(s.Err, "no stale sessions")
			}
			if err != nil {
				return exit(1, err)
			}
			return nil
		},
	}
	kube.addConnection(cmd.Flags())
	cmd.Flags().BoolVar(&all, "all", false, "every session, live ones included")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "with --all, how long a live session gets to put things back itself")
	return cmd
}
