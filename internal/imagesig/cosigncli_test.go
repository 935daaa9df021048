package imagesig

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

// Images signed by the real cosign CLI with a key, in both of its
// layouts (the .sig tag of cosign 2, the bundle referrer cosign 3 writes
// by default), verify with that key's public half and not with another
// key's.
func TestImagesSignedByTheRealCosignCLIWithAKey(t *testing.T) {
	cosign := testenv.CosignBinary(t)
	reg := testenv.NewRegistry(t)
	c := registry.New()
	ctx := context.Background()
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=", "HOME="+dir, "COSIGN_YES=true", "SIGSTORE_NO_CACHE=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("generate-key-pair", "--output-key-prefix", "ci")
	run("generate-key-pair", "--output-key-prefix", "other")
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	ciKeys, err := ParseKeys(read("ci.pub"))
	if err != nil {
		t.Fatal(err)
	}
	otherKeys, err := ParseKeys(read("other.pub"))
	if err != nil {
		t.Fatal(err)
	}
	withReferrers := testenv.NewRegistryWithReferrers(t)
	for _, layout := range []struct {
		name, tag string
		args      []string
		reg       *testenv.Registry
	}{
		{"the .sig tag", "sig", []string{"--new-bundle-format=false", "--use-signing-config=false"}, reg},
		{"a bundle referrer", "bundle", []string{"--new-bundle-format=true", "--use-signing-config=false"}, reg},
		// A registry whose referrers API reports a bundle by its config's
		// media type (go-containerregistry's own, with the API on).
		{"a bundle referrer, the referrers API reporting the config's type", "bundle", []string{"--new-bundle-format=true", "--use-signing-config=false"}, withReferrers},
	} {
		reg := layout.reg
		t.Run(layout.name, func(t *testing.T) {
			d := reg.Push(t, "team/web:"+layout.tag)
			ref := reg.Host + "/team/web@" + d
			args := append([]string{"sign", "--key", filepath.Join(dir, "ci.key"), "--tlog-upload=false", "--allow-http-registry", "--allow-insecure-registry"}, layout.args...)
			run(append(args, ref)...)
			// Where cosign put it: the tag of cosign 2's layout, or a
			// referrer of the digest (not the tag).
			_, tagErr := c.Digest(ctx, reg.Host+"/team/web:"+strings.Replace(d, ":", "-", 1)+".sig")
			refs, err := c.Referrers(ctx, reg.Host+"/team/web", d, BundleArtifactType)
			if err != nil {
				t.Fatal(err)
			}
			if bundle := layout.tag == "bundle"; (tagErr == nil) == bundle || (len(refs) > 0) != bundle {
				t.Fatalf("cosign wrote a .sig tag: %v, %d bundle referrers; want the %s only", tagErr == nil, len(refs), layout.name)
			}
			if by, err := VerifyCosign(ctx, c, reg.Host+"/team/web", d, &Policy{Keys: ciKeys, Name: "key of Secret ci"}); err != nil || by != "key of Secret ci" {
				t.Errorf("signed by the key trusted: %q, %v", by, err)
			}
			if _, err := VerifyCosign(ctx, c, reg.Host+"/team/web", d, &Policy{Keys: otherKeys, Name: "key of Secret other"}); err == nil {
				t.Error("verified with another key")
			}
		})
	}
}
