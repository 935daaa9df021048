// Command vault is HashiCorp Vault's server and CLI (its own command
// package), built from the Go module proxy through this module: Vault's
// go.mod replaces its api and sdk with its own tree, which `go install`
// refuses. The tests run its dev server for the transit engine SOPS
// encrypts with (sops.vault-token).
package main

import (
	"os"

	"github.com/hashicorp/vault/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:]))
}
