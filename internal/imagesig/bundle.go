package imagesig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sluice.dev/sluice/internal/registry"
)

// BundleArtifactType is the artifact type of the Sigstore bundles cosign 3
// attaches to an image it signs (OCI referrers).
const BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// The in-toto statement cosign 3 signs for an image.
const (
	inTotoPayloadType = "application/vnd.in-toto+json"
	cosignSignV1      = "https://sigstore.dev/cosign/sign/v1"
)

// statement is the part of an in-toto statement Sluice reads.
type statement struct {
	Type    string `json:"_type"`
	Subject []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	PredicateType string `json:"predicateType"`
}

// verifyBundles checks the Sigstore bundles that refer to repo@digest, as
// cosign 3 attaches them: whose signature verified, or what was seen.
func verifyBundles(ctx context.Context, reg *registry.Client, repo, digest string, p *Policy) (string, []string, error) {
	descs, err := reg.Referrers(ctx, repo, digest, BundleArtifactType)
	if err != nil {
		return "", nil, err
	}
	var seen []string
	for i, desc := range descs {
		if i >= maxSignatures {
			break
		}
		ref, err := reg.ParseReference(repo + "@" + desc.Digest.String())
		if err != nil {
			return "", nil, err
		}
		img, err := reg.Image(ctx, ref)
		if err != nil {
			return "", nil, fmt.Errorf("reading the Sigstore bundle %s: %w", ref, err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) == 0 {
			seen = append(seen, "a bundle without content ("+desc.Digest.String()+")")
			continue
		}
		data, err := readLayer(layers[0])
		if err != nil {
			if errors.Is(err, errTooLarge) {
				seen = append(seen, "a bundle too large to read")
				continue
			}
			return "", nil, fmt.Errorf("reading the Sigstore bundle %s: %w", ref, err)
		}
		by, err := verifyBundle(p, data, digest)
		if err != nil {
			seen = append(seen, "a bundle "+strings.TrimPrefix(err.Error(), "one "))
			continue
		}
		return by, nil, nil
	}
	return "", seen, nil
}

// imageStatement checks that a signed payload is cosign 3's signature of
// the image digest: an in-toto statement of predicate type
// https://sigstore.dev/cosign/sign/v1 whose subject is the digest.
func imageStatement(payload []byte, digest string) error {
	var st statement
	if err := json.Unmarshal(payload, &st); err != nil || !strings.HasPrefix(st.Type, "https://in-toto.io/Statement/") {
		return errors.New("not of an in-toto statement")
	}
	if st.PredicateType != cosignSignV1 {
		return fmt.Errorf("of an attestation (%s), not a signature", st.PredicateType)
	}
	hexDigest := strings.TrimPrefix(digest, "sha256:")
	var others []string
	for _, s := range st.Subject {
		if s.Digest["sha256"] == hexDigest {
			return nil
		}
		others = append(others, "sha256:"+s.Digest["sha256"])
	}
	return fmt.Errorf("for %s", strings.Join(others, ", "))
}
