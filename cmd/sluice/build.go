package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/repoconfig"
)

type buildFlags struct {
	engine engineFlags
	files  []string
	names  []string
	tag    string
	output string
}

func newBuildCmd(s Streams) *cobra.Command {
	f := &buildFlags{}
	cmd := &cobra.Command{
		Use:   "build -f PATH...",
		Short: "Build the Images found in the given files, in parallel, and push them",
		Long: `Build every Image found in the given files and directories (and in the
repositories of the RepoConfigs there): the mapped files
of its sources become one reproducible layer on its base image (each
platform of a multi-platform base), pushed under its tags. An image whose
inputs (base digest, files, configuration) were built before is only
tagged: nothing is uploaded.

Exit codes: 0 success, 1 an image failed, 2 invalid input or error.`,
		Example: `  sluice build -f deploy/images/
  sluice build -f deploy/images/ --image guestbook --tag dev-alice`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files) == 0 {
				return exit(2, errors.New("-f is required: the files or directories holding Images"))
			}
			if f.tag != "" {
				if err := v1alpha1.ValidateTag(f.tag); err != nil {
					return exit(2, fmt.Errorf("--tag: %w", err))
				}
			}
			_, b, _, err := f.engine.engines(s)
			if err != nil {
				return exit(2, err)
			}
			l, err := repoconfig.Load(cmd.Context(), b.Cache, f.files, override.Set{})
			if err != nil {
				return exit(2, err)
			}
			names := f.names
			if len(names) == 0 {
				names = nil
			}
			images, err := repoconfig.Select(l.Set.Images, names)
			if err != nil {
				return exit(2, err)
			}
			if len(images) == 0 {
				return exit(2, errors.New("no Image found"))
			}
			var tags []string
			if f.tag != "" {
				tags = []string{f.tag}
			}
			results := b.Build(cmd.Context(), images, build.Options{Tags: tags})
			return printBuild(s, f.output, results)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file or directory of Images (repeatable)")
	fl.StringArrayVar(&f.names, "image", nil, "build only the Image of this name (repeatable)")
	fl.StringVar(&f.tag, "tag", "", "push every image under this tag too (a mutable deployment tag)")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	f.engine.add(fl)
	return cmd
}

func printBuild(s Streams, output string, results []build.Result) error {
	if output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	}
	var failed []string
	for _, r := range results {
		if r.Err != nil {
			failed = append(failed, r.Name)
			fmt.Fprintf(s.Err, "✗ %s\n", r.Error)
			continue
		}
		if output != "json" {
			fmt.Fprintln(s.Out, imageLine(r, r.Digest))
		}
	}
	if len(failed) > 0 {
		return exit(1, fmt.Errorf("%d of %d images failed: %s", len(failed), len(results), strings.Join(failed, ", ")))
	}
	return nil
}

// imageLine is one built image: name, reference, whether it was built or
// only tagged, tags, source.
func imageLine(r build.Result, digest string) string {
	how := "built"
	if !r.Built {
		how = "unchanged, tagged"
	}
	return fmt.Sprintf("%s %s@%s %s [%s] from %s", r.Name, r.Image, digest, how, strings.Join(r.Tags, ", "), r.Source)
}
