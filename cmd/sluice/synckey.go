package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/internal/synckey"
)

type syncKeyFlags struct {
	kube   kubeFlags
	secret string
	rotate bool
}

func newSyncKeyCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync-key",
		Short: "Make the key the values charts generate, and encrypted Secrets' digests, derive from",
		Long: `A chart's templates generate values (randAlphaNum passwords, genCA
certificates, uuidv4, now). Sluice derives each from the sync key, the
sync and the template, so that they are the same at every hydration;
without the key a hydration that needs one fails, and never makes values at
random. Keep the key as you keep a signing key: in a CI secret
($SLUICE_SYNC_KEY) or a file (--sync-key). sluice serve reads its own from
the Secret sluice-sync-key of its namespace (--sync-key-secret), which
--secret makes: the key goes from this process to the API server only.

Rotating the key gives every sync hydrated with it new values (and new
encryptions of its Secrets) at its next hydration: make a new one and
replace the old (--rotate). To rotate one sync's values alone, set its
annotation sluice.dev/rotate-generated to a new value.`,
		Args: cobra.NoArgs,
	}
	f := &syncKeyFlags{}
	newCmd := &cobra.Command{
		Use:   "new",
		Short: "Print a new sync key, or put it in the controller's Secret",
		Example: `  sluice sync-key new > sync.key
  sluice sync-key new | gh secret set SLUICE_SYNC_KEY
  sluice sync-key new --secret sluice-system/sluice-sync-key
  sluice sync-key new --secret sluice-system/sluice-sync-key --rotate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key := synckey.New()
			if f.secret == "" {
				_, err := fmt.Fprintf(s.Out, "# A Sluice sync key: secret. Pass it with --sync-key FILE or $SLUICE_SYNC_KEY.\n%s\n", key)
				return err
			}
			ref, err := parseNamespacedName(f.secret)
			if err != nil || ref.Namespace == "" {
				return exit(2, fmt.Errorf("--secret %q: expected NAMESPACE/NAME", f.secret))
			}
			c, err := f.kube.connect()
			if err != nil {
				return exit(2, err)
			}
			what, err := synckey.Put(context.Background(), c.Kube(), ref, key, f.rotate)
			if err != nil {
				return exit(1, err)
			}
			fmt.Fprintf(s.Out, "%s Secret %s: a sync key made %s\n", what, ref, key.Created.Format("2006-01-02T15:04:05Z"))
			return nil
		},
	}
	fl := newCmd.Flags()
	fl.StringVar(&f.secret, "secret", "", "put the key in this Secret (NAMESPACE/NAME, key \"key\") instead of printing it: the one sluice serve reads")
	fl.BoolVar(&f.rotate, "rotate", false, "with --secret, replace the key the Secret holds: every sync gets new generated values at its next hydration")
	f.kube.addConnection(fl)
	cmd.AddCommand(newCmd)
	return cmd
}
