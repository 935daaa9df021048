package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/testenv"
)

// `sluice hydrate --artifact-keyless` as a CI job runs it: the job's
// identity token in $SIGSTORE_ID_TOKEN (here a service account's of the
// test cluster, which the real Fulcio trusts), the artifact pushed,
// certified, timestamped and attested, and the real cosign verify
// accepts it for that identity. A sync whose spec asks for a signature
// the command was given no key for fails, naming the flags, and pushes
// nothing.
func TestHydrateSignsKeylessWithTheCIsToken(t *testing.T) {
	srv := testenv.NewGitServer(t)
	app := srv.CreateRepo(t, "app")
	w := testenv.NewWork(t, app)
	w.Write(map[string]string{"web/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {greeting: hello}\n"}).Commit("apps")
	w.Push("main")
	reg := testenv.NewRegistry(t)
	sig := testenv.StartClusterSigstore(t, cp)
	ns := testenv.Namespace("ci")
	token, err := os.ReadFile(sig.Token(t, ns, "ci-job", "sigstore"))
	if err != nil {
		t.Fatal(err)
	}
	syncs := t.TempDir()
	write := func(tag, signing string) {
		y := fmt.Sprintf("apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: web-%s}\nspec:\n  source: {repo: %s, path: web}\n  destination: {repo: oci://%s/team/deploy, tag: %s, path: apps/web%s}\n", tag, app, reg.Host, tag, signing)
		if err := os.WriteFile(filepath.Join(syncs, "web.yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dev", "")
	t.Setenv("SIGSTORE_ID_TOKEN", string(token))
	out, errs, code := run(t, "hydrate", "-f", syncs, "--cache-dir", t.TempDir(), "-o", "json",
		"--artifact-keyless", "--fulcio-url", sig.Fulcio.URL, "--timestamp-url", sig.TSA.URL, "--rekor-url", sig.Rekor.URL)
	if code != 0 {
		t.Fatalf("sluice hydrate: exit %d\n%s%s", code, out, errs)
	}
	_, after, _ := strings.Cut(out, `"commit": "`)
	digest, _, _ := strings.Cut(after, `"`)
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("no digest in the result:\n%s", out)
	}
	ref := reg.Host + "/team/deploy@" + digest
	if _, err := testenv.CosignVerify(t, ref, "slsaprovenance1", nil, sig.VerifyArgs(sig.Identity(ns, "ci-job"))...); err != nil {
		t.Error(err)
	}

	// The spec asks for a signature; the command has no key.
	write("prod", ", signing: {secretRef: {name: cosign}}")
	t.Setenv("SIGSTORE_ID_TOKEN", "")
	out, errs, code = run(t, "hydrate", "-f", syncs, "--cache-dir", t.TempDir())
	if code == 0 || !strings.Contains(out+errs, "--artifact-key") {
		t.Errorf("a sync asking for a signature, no key given: exit %d\n%s%s", code, out, errs)
	}
	tag, _ := name.NewTag(reg.Host+"/team/deploy:prod", name.Insecure)
	if _, err := remote.Head(tag); err == nil {
		t.Error("the tag prod was pushed unsigned")
	}
}
