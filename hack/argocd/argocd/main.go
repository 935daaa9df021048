// Command argocd is the two parts of Argo CD that sync an Application, in
// one binary as Argo CD ships them: its application controller and its
// repo-server, chosen by the first argument.
//
//	argocd application-controller [flags]
//	argocd repo-server [flags]
//
// The live-session tests run both against the test control plane, so that
// what they claim Argo CD does (prune, self-heal, a pause that holds) is
// what Argo CD does.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	controller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
)

func main() {
	parts := map[string]func() *cobra.Command{
		"application-controller": controller.NewCommand,
		"repo-server":            reposerver.NewCommand,
	}
	if len(os.Args) < 2 || parts[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: argocd application-controller|repo-server [flags]")
		os.Exit(2)
	}
	cmd := parts[os.Args[1]]()
	cmd.SetArgs(os.Args[2:])
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
