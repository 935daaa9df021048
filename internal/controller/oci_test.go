package controller

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/testenv"
)

// The API server holds an OCI destination to its form (the CRD's rule: a
// tag and no branch; a git destination a branch and no tag).
func TestOCIDestinationsAtTheAPIServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct{ destination, want string }{
		{"{repo: oci://REG/team/deploy, branch: env/dev, path: apps/web}", "an oci:// destination takes a tag and no branch"},
		{"{repo: DST, tag: dev, path: apps/web}", "an oci:// destination takes a tag and no branch"},
		{"{repo: DST, path: apps/web}", "a git destination a branch and no tag"},
		{"{repo: oci://REG/team/deploy, tag: dev, path: apps/web, signing: {provider: gpg, secretRef: {name: k}}}", "Unsupported value: \"gpg\""},
	} {
		ms := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: e.ns}}
		y := e.expand(strings.Replace(webSync, "{repo: DST, branch: env/dev, path: apps/web}", c.destination, 1), "")
		if err := yaml.UnmarshalStrict([]byte(y), ms); err != nil {
			t.Fatal(err)
		}
		ms.Namespace = e.ns
		err := e.c.Create(ctx, ms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("creating a sync with destination %s: %v, want %q", c.destination, err, c.want)
		}
	}
}

// ociSync writes the web folder into the artifact oci://REG/team/deploy:TAG,
// pushed with the credentials of Secret registry and signed as SIGNING.
const ociSync = `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: NAME}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  registrySecretRef: {name: registry}
  destination:
    repo: oci://REG/team/deploy
    tag: TAG
    path: apps/NAME
    secretRef: {name: PUSHCREDS}
    signing: SIGNING
  interval: 1h
`

// The controller pushes a sync's folder into a private registry, with
// the write credentials of a dockerconfigjson Secret, as an artifact
// signed with the cosign key of a Secret (cosign generate-key-pair
// k8s:// writes one so) with its SLSA provenance: the real cosign verify
// and verify-attestation accept both, and the status says the digest
// the tag names. A key that cannot sign (its password wrong), and
// credentials the registry refuses, fail their sync saying which, and
// no tag moves.
func TestTheControllerPushesSignedOCIArtifacts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.reg.RequireAuth("pusher", "s3cret")
	dockerConfig := func(password string) []byte {
		auth := base64.StdEncoding.EncodeToString([]byte("pusher:" + password))
		return fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, e.reg.Host, auth)
	}
	keys := t.TempDir()
	gen := exec.Command(testenv.CosignBinary(t), "generate-key-pair")
	gen.Dir, gen.Env = keys, append(os.Environ(), "COSIGN_PASSWORD=pw")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	cosignKey, _ := os.ReadFile(filepath.Join(keys, "cosign.key"))
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "registry"}, Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig("s3cret")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "registry-stale"}, Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig("old")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cosign"}, Data: map[string][]byte{"cosign.key": cosignKey, "cosign.password": []byte("pw")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cosign-wrong"}, Data: map[string][]byte{"cosign.key": cosignKey, "cosign.password": []byte("not-it")}},
	} {
		s.Namespace = e.ns
		if err := e.c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	sync := func(name, tag, secret, signing string) string {
		return strings.NewReplacer("TAG", tag, "PUSHCREDS", secret, "SIGNING", signing).Replace(e.expand(ociSync, name))
	}
	e.apply(sync("web", "dev", "registry", "{secretRef: {name: cosign}}"))
	e.apply(sync("bad-key", "bad-key", "registry", "{secretRef: {name: cosign-wrong}}"))
	e.apply(sync("bad-creds", "bad-creds", "registry-stale", "{secretRef: {name: cosign}}"))
	e.apply(sync("no-token", "no-token", "registry", "{keyless: {}}"))

	ms := e.ready("web", metav1.ConditionTrue, 60*time.Second)
	opts := []remote.Option{remote.WithAuth(&authn.Basic{Username: "pusher", Password: "s3cret"})}
	head := func(tag string) (*v1.Descriptor, error) {
		ref, err := name.NewTag(e.reg.Host+"/team/deploy:"+tag, name.Insecure)
		if err != nil {
			return nil, err
		}
		return remote.Head(ref, opts...)
	}
	desc, err := head("dev")
	if err != nil {
		t.Fatal(err)
	}
	if d := ms.Status.Destination; d == nil || d.Digest != desc.Digest.String() || d.Tag != "dev" || d.Repo != "oci://"+e.reg.Host+"/team/deploy" || d.Branch != "" {
		t.Errorf("status.destination = %+v, want digest %s of tag dev", ms.Status.Destination, desc.Digest)
	}
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Message != "pushed "+desc.Digest.String()[:19]+" to dev" {
		t.Errorf("Ready says %q, not the digest %s", c.Message, desc.Digest)
	}

	// The real cosign, with the registry's credentials in a docker config
	// of its own.
	docker := t.TempDir()
	if err := os.WriteFile(filepath.Join(docker, "config.json"), dockerConfig("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref, pub, env := e.reg.Host+"/team/deploy@"+desc.Digest.String(), filepath.Join(keys, "cosign.pub"), []string{"DOCKER_CONFIG=" + docker}
	if _, err := testenv.CosignVerify(t, ref, "", env, "--key", pub, "--insecure-ignore-tlog"); err != nil {
		t.Error(err)
	}
	payload, err := testenv.CosignVerify(t, ref, "slsaprovenance1", env, "--key", pub, "--insecure-ignore-tlog")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name":"` + e.ns + `/web"`, `"gitCommit":"` + e.app.Head(), `"folder":"apps/web"`} {
		if !strings.Contains(payload, want) {
			t.Errorf("the provenance lacks %s:\n%s", want, payload)
		}
	}

	for _, c := range []struct{ sync, want string }{
		{"bad-key", "spec.destination.signing: Secret " + e.ns + "/cosign-wrong key cosign.key"},
		{"bad-creds", "401 Unauthorized"},
		{"no-token", "spec.destination.signing.keyless: the controller has no identity token"},
	} {
		ms := e.ready(c.sync, metav1.ConditionFalse, 60*time.Second)
		if cond := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); cond.Reason != v1alpha1.ReasonFailed || !strings.Contains(cond.Message, c.want) {
			t.Errorf("%s: Ready %s: %s, want %q", c.sync, cond.Reason, cond.Message, c.want)
		}
		if _, err := head(c.sync); err == nil {
			t.Errorf("%s: the tag %s moved", c.sync, c.sync)
		}
	}
	if strings.Contains(e.logs.String(), "s3cret") || strings.Contains(e.logs.String(), "not-it") {
		t.Error("a credential or password reached the controller's logs")
	}
}

// Keyless, as the controller signs in a cluster: with its service
// account's token of audience sigstore (a projected token's file,
// --identity-token-file), a certificate from the real Fulcio trusting the
// cluster, a timestamp from the real timestamp authority; the real cosign
// verify accepts the artifact and its provenance for the service
// account's identity.
func TestTheControllerSignsKeylessAsItsServiceAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sig := testenv.StartClusterSigstore(t, cp)
	token := sig.Token(t, e.ns, "sluice-controller", "sigstore")
	e.start(func(o *Options) { o.IdentityTokenFile = token })
	keyless := strings.NewReplacer("FULCIO", sig.Fulcio.URL, "TSA", sig.TSA.URL, "REKOR", sig.Rekor.URL).Replace(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: NAME}
spec:
  source: {repo: APP, ref: main, path: deploy/NAME}
  images: [{name: REG/team/app}]
  destination:
    repo: oci://REG/team/deploy
    tag: dev
    path: apps/NAME
    signing: {keyless: {fulcioURL: FULCIO, timestampURL: TSA, rekorURL: REKOR}}
  interval: 1h
  prune: true
`)
	e.apply(e.expand(keyless, "web"))
	e.apply(e.expand(keyless, "api"))
	e.ready("api", metav1.ConditionTrue, 60*time.Second)
	ms := e.ready("web", metav1.ConditionTrue, 60*time.Second)
	ref, args := e.reg.Host+"/team/deploy@"+ms.Status.Destination.Digest, sig.VerifyArgs(sig.Identity(e.ns, "sluice-controller"))
	if _, err := testenv.CosignVerify(t, ref, "", nil, args...); err != nil {
		t.Error(err)
	}
	payload, err := testenv.CosignVerify(t, ref, "slsaprovenance1", nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(payload, `"name":"`+e.ns+`/web"`) {
		t.Errorf("the provenance lacks the sync:\n%s", payload)
	}

	// spec.prune: the deleted sync's folder leaves the artifact, in a
	// new one, signed as the first.
	ctx := context.Background()
	if err := e.c.Delete(ctx, e.sync("web")); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, func() string {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "web"}, &v1alpha1.ManifestSync{}); err == nil {
			return "web is not deleted yet"
		}
		return ""
	})
	tag, _ := name.NewTag(e.reg.Host+"/team/deploy:dev", name.Insecure)
	files, _, digest, _, err := ociartifact.Read(ctx, tag, ociartifact.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if files["apps/api/.sluice.yaml"] == nil || files["apps/web/.sluice.yaml"] != nil || digest.String() == ms.Status.Destination.Digest {
		t.Errorf("after the pruning sync's deletion the tag is at %s (was %s), holding %v", digest, ms.Status.Destination.Digest, slices.Sorted(maps.Keys(files)))
	}
	if _, err := testenv.CosignVerify(t, e.reg.Host+"/team/deploy@"+digest.String(), "", nil, args...); err != nil {
		t.Errorf("the pruned artifact: %v", err)
	}
}

// A registry answering 429 to every push of the destination: the sync
// fails saying so and backs off (its attempts a handful over 15 s, not a
// loop), the tag never moves; once the registry takes pushes again, the
// sync lands with nobody acting.
func TestARegistryRefusingPushesBacksOffAndRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var puts atomic.Int64
	e.reg.FailWith(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/team/deploy/") && r.Method != http.MethodGet && r.Method != http.MethodHead {
			puts.Add(1)
			return http.StatusTooManyRequests
		}
		return 0
	})
	e.start()
	e.apply(e.expand(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: web}
spec:
  source: {repo: APP, ref: main, path: deploy/web}
  images: [{name: REG/team/app}]
  destination: {repo: oci://REG/team/deploy, tag: dev, path: apps/web}
  interval: 1h
`, "web"))
	ms := e.ready("web", metav1.ConditionFalse, 60*time.Second)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c.Reason != v1alpha1.ReasonFailed || !strings.Contains(c.Message, "429") {
		t.Errorf("Ready %s: %s, want the registry's 429", c.Reason, c.Message)
	}
	time.Sleep(15 * time.Second)
	// The retries the controller logged back off: 5 s, then longer.
	var retries []time.Duration
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if !strings.Contains(line, `msg="hydrating failed" manifestsync=`+e.ns+"/web ") {
			continue
		}
		if _, after, ok := strings.Cut(line, " retry="); ok {
			d, err := time.ParseDuration(strings.Fields(after)[0])
			if err == nil {
				retries = append(retries, d)
			}
		}
	}
	if len(retries) < 2 || retries[0] < 5*time.Second || !slices.IsSorted(retries) || retries[len(retries)-1] <= retries[0] {
		t.Errorf("the retries after 429s: %v, want growing from 5 s (%d refused requests)", retries, puts.Load())
	}
	tag, _ := name.NewTag(e.reg.Host+"/team/deploy:dev", name.Insecure)
	if _, err := remote.Head(tag); err == nil {
		t.Error("the tag exists while every push was refused")
	}
	e.reg.FailWith(nil)
	e.eventually(90*time.Second, func() string {
		ms := e.sync("web")
		if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return "not Ready yet"
		}
		return ""
	})
	if _, err := remote.Head(tag); err != nil {
		t.Errorf("the tag after recovery: %v", err)
	}
}
