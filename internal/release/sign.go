package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ChecksumsBundle is the cosign bundle of the checksums' signature: with
// the sums, it signs every archive and SBOM of the release.
const ChecksumsBundle = ChecksumsName + ".sigstore.json"

// sign signs the image (when one was pushed) and the checksums with
// cosign: by key, or keyless when no key is given (a CI's OIDC identity,
// Fulcio and Rekor).
func sign(ctx context.Context, o Options, image string) (Artifact, error) {
	by := []string{"--yes"}
	if o.Key != "" {
		// A key of the release engineer's: nothing leaves the machine
		// (no transparency log, no TUF-provided signing config).
		by = append(by, "--key", o.Key, "--tlog-upload=false", "--use-signing-config=false")
	}
	run := func(registry bool, verb string, rest ...string) error {
		args := append([]string{verb}, by...)
		if registry {
			args = append(args, o.CosignArgs...)
		}
		cmd := exec.CommandContext(ctx, o.Cosign, append(args, rest...)...)
		cmd.Env = os.Environ()
		if o.Key != "" && os.Getenv("COSIGN_PASSWORD") == "" {
			cmd.Env = append(cmd.Env, "COSIGN_PASSWORD=")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cosign %s: %w\n%s", verb, err, out)
		}
		return nil
	}
	if image != "" {
		fmt.Fprintf(o.Log, "signing %s\n", image)
		if err := run(true, "sign", image); err != nil {
			return Artifact{}, err
		}
	}
	fmt.Fprintf(o.Log, "signing %s\n", ChecksumsName)
	sums := filepath.Join(o.Out, ChecksumsName)
	if err := run(false, "sign-blob", "--bundle", filepath.Join(o.Out, ChecksumsBundle), sums); err != nil {
		return Artifact{}, err
	}
	return artifact(o.Out, ChecksumsBundle, "signature", "")
}
