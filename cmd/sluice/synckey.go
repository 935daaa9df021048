package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/synckey"
)

func newSyncKeyCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync-key",
		Short: "Make the key the values charts generate, and encrypted Secrets' digests, derive from",
		Long: `A chart's templates generate values (randAlphaNum passwords, genCA
certificates, uuidv4, now). Sluice derives each from the sync key, the
sync and the template, so that they are the same at every hydration;
without the key a hydration that needs one fails, and never makes values at
random. Keep the key as you keep a signing key: in a CI secret
($SLUICE_SYNC_KEY) or a file (--sync-key). sluice serve keeps its own in the
Secret sluice-sync-key of its namespace, made when first needed.

Rotating the key gives every sync hydrated with it new values at its next
hydration: make a new one and replace the old. To rotate one sync's values
alone, set its annotation sluice.dev/rotate-generated to a new value.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "new",
		Short: "Print a new sync key",
		Example: `  sluice sync-key new > ~/.config/sluice/sync.key
  sluice sync-key new | gh secret set SLUICE_SYNC_KEY`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(s.Out, "# A Sluice sync key: secret. Pass it with --sync-key FILE or $SLUICE_SYNC_KEY.\n%s\n", synckey.New())
			return err
		},
	})
	return cmd
}
