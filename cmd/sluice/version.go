package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/render"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version is used.
var version = ""

func newVersionCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of Sluice and its rendering engines",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(s.Out, "sluice %s\nkustomize %s\nhelm %s\n", sluiceVersion(), render.Version(render.Kustomize), render.Version(render.Helm))
			return nil
		},
	}
}

// sluiceVersion is this binary's version.
func sluiceVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
