package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/repoconfig"
	"sluice.dev/sluice/internal/takeover"
)

type takeoverFlags struct {
	engine    engineFlags
	files     []string
	local     []string
	overrides []string
	tag       string
	build     []string
	duration  time.Duration
	steal     bool
	output    string
}

func newTakeoverCmd(s Streams) *cobra.Command {
	f := &takeoverFlags{}
	cmd := &cobra.Command{
		Use:   "takeover -f PATH... [--local .] [--build IMAGE,...] [--tag TAG] [--for 2h]",
		Short: "Hydrate an environment from a branch or your working tree, for a while",
		Long: `Take over the environments the given files (the very ManifestSyncs,
RepoConfigs and Images the automatic deployment uses) hydrate:

  - sources read from your working tree (--local, uncommitted changes
    included; nothing is committed or pushed) or a branch (--override-repo
    URL=URL?ref=BRANCH), remote kustomize bases included;
  - the Images named by --build are built from there and pushed under the
    mutable deployment tag (--tag, default dev-USER); every other image
    keeps the digest its tag resolves to, or the deployment tag's where it
    exists;
  - every destination folder records the takeover (you, your tree's commit
    and a hash of its uncommitted changes, the tag, the expiry) and is
    locked: until --for passes (default 2h, at most 12h) or 'sluice
    takeover release', a regular 'sluice hydrate' skips it, and another
    developer's takeover is refused unless --steal.

Run it again after changing files to update the environment (and extend
the lock).`,
		Example: `  sluice takeover -f deploy/ --local . --build guestbook
  sluice takeover -f deploy/repoconfig.yaml --override-repo https://git.example.com/team/code.git=https://git.example.com/team/code.git?ref=alice/feature
  sluice takeover release -f deploy/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files) == 0 {
				return exit(2, errors.New("-f is required: the files the deployment hydrates from"))
			}
			cache, b, h, err := f.engine.engines(s)
			if err != nil {
				return exit(2, err)
			}
			defer closeSandbox(h.Sandbox)
			var names []string
			for _, n := range f.build {
				names = append(names, splitList(n)...)
			}
			rep, err := takeover.Take(cmd.Context(), takeover.Options{
				Paths: f.files, Local: f.local, Overrides: f.overrides, Tag: f.tag, Build: names,
				For: f.duration, Steal: f.steal, Cache: cache, Builder: b, Hydrate: h,
			})
			if err != nil {
				return exit(2, err)
			}
			return printReconcile(s, f.output, rep)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file or directory of ManifestSyncs, RepoConfigs and Images (repeatable)")
	fl.StringArrayVar(&f.local, "local", nil, "read a repository from a working tree: REPO=PATH, or PATH for the repository it is a clone of (repeatable)")
	fl.StringArrayVar(&f.overrides, "override-repo", nil, "FROM=TO: read repository FROM as TO (URL?ref=BRANCH, another URL, a path) (repeatable)")
	fl.StringVar(&f.tag, "tag", "", "the mutable deployment tag (default: dev-USER)")
	fl.StringArrayVar(&f.build, "build", nil, "Images to build and push under the deployment tag (comma-separated, repeatable)")
	fl.DurationVar(&f.duration, "for", 2*time.Hour, "how long the lock holds (at most 12h)")
	fl.BoolVar(&f.steal, "steal", false, "take folders another developer's takeover locks")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	f.engine.add(fl)
	cmd.AddCommand(newTakeoverReleaseCmd(s))
	return cmd
}

func newTakeoverReleaseCmd(s Streams) *cobra.Command {
	var engine engineFlags
	var files []string
	var steal bool
	var output string
	cmd := &cobra.Command{
		Use:   "release -f PATH...",
		Short: "End your takeover: hydrate the regular configuration again",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return exit(2, errors.New("-f is required: the files the deployment hydrates from"))
			}
			cache, b, h, err := engine.engines(s)
			if err != nil {
				return exit(2, err)
			}
			defer closeSandbox(h.Sandbox)
			rep, err := takeover.Release(cmd.Context(), takeover.Options{Paths: files, Steal: steal, Cache: cache, Builder: b, Hydrate: h})
			if err != nil {
				return exit(2, err)
			}
			return printReconcile(s, output, rep)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file or directory of ManifestSyncs, RepoConfigs and Images (repeatable)")
	cmd.Flags().BoolVar(&steal, "steal", false, "release folders another developer's takeover locks too")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	engine.add(cmd.Flags())
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// printReconcile prints images and syncs, a line each, or JSON.
func printReconcile(s Streams, output string, rep *repoconfig.Report) error {
	if output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, src := range rep.Sources {
			fmt.Fprintf(s.Out, "from %s\n", src)
		}
		for _, r := range rep.Images {
			if r.Err != nil {
				fmt.Fprintf(s.Out, "✗ image %s\n", r.Error)
				continue
			}
			fmt.Fprintln(s.Out, "image "+imageLine(r, shortDigestOf(r.Digest)))
		}
		for _, r := range rep.Retagged {
			if r.Err != nil {
				fmt.Fprintf(s.Out, "✗ image %s\n", r.Error)
				continue
			}
			fmt.Fprintf(s.Out, "image %s %s@%s tagged %s (from %s)\n", r.Name, r.Image, shortDigestOf(r.Digest), strings.Join(r.Tags, ", "), r.Source)
		}
		for _, r := range rep.Syncs {
			printSync(s, r)
		}
	}
	if err := rep.Err(); err != nil {
		return exit(1, err)
	}
	return nil
}

func shortDigestOf(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
