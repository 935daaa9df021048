package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/hydrate"
)

type hydrateFlags struct {
	engine   engineFlags
	files    []string
	syncs    []string
	dryRun   bool
	force    bool
	out      string
	output   string
	parallel int
	// How OCI artifacts are signed: a cosign key, keyless, or Notation.
	artifactKey, notationKey, notationCert string
	keyless                                bool
	identityToken, fulcioURL, timestampURL string
	rekorURL                               string
}

func newHydrateCmd(s Streams, g *globalFlags) *cobra.Command {
	f := &hydrateFlags{}
	cmd := &cobra.Command{
		Use:   "hydrate -f PATH...",
		Short: "Render ManifestSyncs into their destination branches",
		Long: `Render every ManifestSync found in the given files and directories, pin
their images to digests, and commit each folder into its destination branch.
Syncs whose inputs and digests did not change are skipped without rendering.

Exit codes: 0 success (with --dry-run: nothing would change), 1 a sync
failed (with --dry-run: something would change), 2 invalid input or error.`,
		Example: `  sluice hydrate -f syncs/
  sluice hydrate -f syncs/ --dry-run
  sluice hydrate -f syncs/ --sync guestbook-dev -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files) == 0 {
				return exit(2, errors.New("-f is required: the files or directories holding ManifestSyncs"))
			}
			if f.output != "text" && f.output != "json" {
				return exit(2, fmt.Errorf("-o %s: must be text or json", f.output))
			}
			o, err := f.options(s, g)
			if err != nil {
				return exit(2, err)
			}
			defer closeSandbox(o.Sandbox)
			report, err := hydrate.RunFiles(cmd.Context(), f.files, f.syncs, o)
			if err != nil {
				return exit(2, err)
			}
			return f.print(s, report)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file or directory of ManifestSyncs (repeatable)")
	fl.StringArrayVar(&f.syncs, "sync", nil, "hydrate only the ManifestSync of this name (repeatable)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would change as a diff; write nothing")
	fl.BoolVar(&f.force, "force", false, "render and write even the syncs that look unchanged")
	fl.StringVar(&f.out, "out", "", "write the folders under this directory (DIR/BRANCH/PATH) instead of git")
	fl.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	fl.IntVar(&f.parallel, "parallel", 0, "syncs rendered at once (default: the number of CPUs)")
	fl.StringVar(&f.artifactKey, "artifact-key", "", "sign every OCI artifact pushed with this cosign key (cosign generate-key-pair's; its password in $COSIGN_PASSWORD), its SLSA provenance attached")
	fl.BoolVar(&f.keyless, "artifact-keyless", false, "sign every OCI artifact pushed with cosign, keyless: a certificate from Fulcio for the CI job's identity token (--identity-token, $SIGSTORE_ID_TOKEN, or GitHub Actions' own, audience sigstore), the signature timestamped")
	fl.StringVar(&f.identityToken, "identity-token", "", "the file of the OIDC identity token keyless signing presents to Fulcio (default: $SIGSTORE_ID_TOKEN, or GitHub Actions' token)")
	fl.StringVar(&f.fulcioURL, "fulcio-url", v1alpha1.DefaultFulcioURL, "the Fulcio that certifies keyless signatures")
	fl.StringVar(&f.timestampURL, "timestamp-url", v1alpha1.DefaultTimestampURL, "the RFC 3161 timestamp authority that timestamps keyless signatures")
	fl.StringVar(&f.rekorURL, "rekor-url", v1alpha1.DefaultRekorURL, "the transparency log (Rekor) keyless signatures are recorded in")
	fl.StringVar(&f.notationKey, "artifact-notation-key", "", "sign every OCI artifact pushed with Notation with this private key (PEM), its SLSA provenance attached and signed")
	fl.StringVar(&f.notationCert, "artifact-notation-cert", "", "the certificate chain (PEM, the key's certificate first) of --artifact-notation-key")
	f.engine.addCache(fl)
	f.engine.addSigning(fl)
	return cmd
}

func (f *hydrateFlags) options(s Streams, g *globalFlags) (hydrate.Options, error) {
	_, _, o, err := f.engine.engines(s)
	if err != nil {
		return o, err
	}
	o.Force, o.DryRun, o.OutDir, o.Parallel = f.force, f.dryRun, f.out, f.parallel
	o.Version = sluiceVersion()
	if o.ArtifactSigner, err = f.artifactSigner(); err != nil {
		return o, err
	}
	o.Log = slog.Default()
	if f.live(s) {
		o.Progress = func(r hydrate.Result) { printSync(s, r) }
	}
	return o, nil
}

// artifactSigner is the signer the flags name, if any.
func (f *hydrateFlags) artifactSigner() (artifactsig.Signer, error) {
	named := 0
	for _, set := range []bool{f.artifactKey != "", f.keyless, f.notationKey != "" || f.notationCert != ""} {
		if set {
			named++
		}
	}
	switch {
	case named > 1:
		return nil, errors.New("--artifact-key, --artifact-keyless and --artifact-notation-key: one of them")
	case f.artifactKey != "":
		data, err := os.ReadFile(f.artifactKey)
		if err != nil {
			return nil, fmt.Errorf("--artifact-key: %w", err)
		}
		k, err := artifactsig.ParseKey(data, []byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			return nil, fmt.Errorf("--artifact-key %s: %w", f.artifactKey, err)
		}
		return artifactsig.CosignKey(k, "the cosign key "+f.artifactKey), nil
	case f.keyless:
		token := artifactsig.TokenFile(f.identityToken)
		if f.identityToken == "" {
			var err error
			if token, err = artifactsig.CIToken(os.Getenv, nil); err != nil {
				return nil, fmt.Errorf("--artifact-keyless: %w", err)
			}
		}
		return artifactsig.KeylessSigner(artifactsig.Keyless{FulcioURL: f.fulcioURL, TimestampURL: f.timestampURL, RekorURL: f.rekorURL, Token: token}), nil
	case f.notationKey != "" || f.notationCert != "":
		if f.notationKey == "" || f.notationCert == "" {
			return nil, errors.New("--artifact-notation-key and --artifact-notation-cert go together")
		}
		key, err := os.ReadFile(f.notationKey)
		if err != nil {
			return nil, fmt.Errorf("--artifact-notation-key: %w", err)
		}
		chain, err := os.ReadFile(f.notationCert)
		if err != nil {
			return nil, fmt.Errorf("--artifact-notation-cert: %w", err)
		}
		k, err := artifactsig.ParseNotationKey(key, chain)
		if err != nil {
			return nil, fmt.Errorf("--artifact-notation-key %s: %w", f.notationKey, err)
		}
		return artifactsig.NotationSigner(k, "the Notation key "+f.notationKey), nil
	}
	return nil, nil
}

// live reports whether each sync's line is printed as its result comes
// (on a terminal); elsewhere the lines come at the end, in the order of
// the syncs, so that a log reads the same every run.
func (f *hydrateFlags) live(s Streams) bool { return f.output == "text" && isTerminal(s.Out) }

func (f *hydrateFlags) print(s Streams, report *hydrate.Report) error {
	if f.output == "json" {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report.Results); err != nil {
			return err
		}
	} else {
		for _, r := range report.Results {
			if r.Diff != "" {
				fmt.Fprint(s.Out, r.Diff)
			}
		}
		if !f.live(s) {
			for _, r := range report.Results {
				printSync(s, r)
			}
		}
	}
	if err := report.Err(); err != nil {
		if f.dryRun {
			return exit(2, err)
		}
		return exit(1, err)
	}
	if f.dryRun && report.Changed() {
		// A difference is the answer a dry run was asked for, not an
		// error: exit 1 says it, without an "error:" line.
		return exit(1, nil)
	}
	return nil
}
