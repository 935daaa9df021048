// Command applicationset-controller is Argo CD's ApplicationSet
// controller alone (Argo CD ships it inside its multi-call binary).
package main

import (
	"os"

	command "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
)

func main() {
	if err := command.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
