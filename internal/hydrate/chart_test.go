package hydrate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"sigs.k8s.io/kustomize/kyaml/kio"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/synckey"
	"sluice.dev/sluice/internal/testenv"
)

// chartFixture is a source repository holding public charts as published
// (podinfo with its production values, grafana, bitnami's redis) and a
// deploy repository, each chart hydrated by a sync whose Secrets are
// encrypted for an age recipient.
type chartFixture struct {
	*fixture
	id  *age.X25519Identity
	key synckey.Key
}

func newChartFixture(t *testing.T) *chartFixture {
	t.Helper()
	f := &fixture{t: t, git: testenv.NewGitServer(t), cacheDir: t.TempDir(), syncDir: t.TempDir()}
	f.appURL = f.git.CreateRepo(t, "app")
	f.app = testenv.NewWork(t, f.appURL)
	f.app.CopyChart(t, "podinfo", "charts/podinfo").CopyChart(t, "grafana", "charts/grafana").CopyChart(t, "bitnami/redis", "charts/redis")
	f.app.Write(map[string]string{"README.md": "# app\n"}).Commit("charts as published")
	f.app.Push("main")
	f.dstURL = f.git.CreateRepo(t, "service-deploy")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	c := &chartFixture{fixture: f, id: id, key: synckey.New()}
	for name, extra := range map[string]string{
		"podinfo": "\n  render:\n    helm: {releaseName: podinfo, namespace: web, valuesFiles: [values-prod.yaml]}",
		"grafana": "\n  render:\n    helm: {releaseName: grafana, namespace: monitoring}",
		"redis":   "\n  render:\n    helm: {releaseName: cache, namespace: data}",
	} {
		f.sync(name, `apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: `+name+`}
spec:
  source: {repo: APP, ref: main, path: charts/`+name+`}`+extra+`
  destination:
    repo: DST
    branch: env/dev
    path: apps/`+name+`
    sops: {age: [`+id.Recipient().String()+`]}
`)
	}
	return c
}

func (c *chartFixture) hydrate(mod ...func(*Options)) *Report {
	c.t.Helper()
	return c.run(append([]func(*Options){func(o *Options) { o.SyncKey = c.key }}, mod...)...)
}

// objectsOf parses the objects of a folder of env/dev.
func (c *chartFixture) objectsOf(folder string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, f := range strings.Fields(c.dstGit("ls-tree", "-r", "--name-only", "env/dev", folder)) {
		if strings.HasSuffix(f, ".sluice.yaml") || strings.HasSuffix(f, ".sourceignore") {
			continue
		}
		objs, err := kio.FromBytes([]byte(c.dstGit("show", "env/dev:"+f)))
		if err != nil {
			c.t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			out[o.GetKind()+"/"+o.GetName()] = o.MustString()
		}
	}
	return out
}

// podinfo's test Pods, which `helm template` prints (the reference helm
// binary shows the fixture has them) and `helm install` never applies,
// are not in its folder; the record says so.
func TestAChartsTestsAreNotHydrated(t *testing.T) {
	c := newChartFixture(t)
	out, err := exec.Command(testenv.HelmBinary(t), "template", "podinfo", testenv.Chart(t, "podinfo"), "-f", filepath.Join(testenv.Chart(t, "podinfo"), "values-prod.yaml")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "helm.sh/hook\": test-success"); n != 3 {
		t.Fatalf("helm template prints %d test hooks of podinfo, the fixture expects 3", n)
	}
	if err := c.hydrate().Err(); err != nil {
		t.Fatal(err)
	}
	for name := range c.objectsOf("apps/podinfo") {
		if strings.HasPrefix(name, "Pod/") {
			t.Errorf("the folder holds the test %s", name)
		}
	}
	prov, err := parseProvenance([]byte(c.dstGit("show", "env/dev:apps/podinfo/.sluice.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if prov.Deployer != v1alpha1.DeployerFlux {
		t.Errorf("the record says deployer %q", prov.Deployer)
	}
	record := c.dstGit("show", "env/dev:apps/podinfo/.sluice.yaml")
	if n := strings.Count(record, "applied: 'left out: a test"); n != 3 {
		t.Errorf("the record says %d tests left out:\n%s", n, record)
	}
}

// An edit that changes nothing deployable (each chart's README) changes
// no file but the records: the generated passwords, the checksums of
// them that roll pods, and their encrypted Secrets stay byte for byte.
func TestAChangeThatDeploysNothingChangesOnlyTheRecords(t *testing.T) {
	c := newChartFixture(t)
	if err := c.hydrate().Err(); err != nil {
		t.Fatal(err)
	}
	first := c.dstGit("rev-parse", "env/dev")
	c.app.Write(map[string]string{
		"charts/podinfo/README.md": "# podinfo\nread me\n",
		"charts/grafana/README.md": "# grafana\nread me\n",
		"charts/redis/README.md":   "# redis\nread me\n",
	}).Commit("READMEs only")
	c.app.Push("main")
	rep := c.hydrate()
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	second := c.dstGit("rev-parse", "env/dev")
	if second == first {
		t.Fatal("nothing was committed: the records should say the new inputs")
	}
	changed := strings.Fields(c.dstGit("diff", "--name-only", first, second))
	for _, f := range changed {
		if filepath.Base(f) != v1alpha1.ProvenanceFile {
			t.Errorf("%s changed with only READMEs edited", f)
		}
	}
	if len(changed) != 3 {
		t.Errorf("changed: %v, want the three records", changed)
	}
}

// The Secrets are committed encrypted for the destination's recipient,
// and decrypt (with the real sops) to the password the chart generated;
// the records name the templates that generated values, never a value.
func TestGeneratedPasswordsAreCommittedEncrypted(t *testing.T) {
	c := newChartFixture(t)
	if err := c.hydrate().Err(); err != nil {
		t.Fatal(err)
	}
	secret := c.objectsOf("apps/grafana")["Secret/grafana"]
	if !strings.Contains(secret, "admin-password: ENC[AES256_GCM,") || !strings.Contains(secret, "sops:") {
		t.Fatalf("grafana's Secret is not encrypted:\n%s", secret)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.SOPSBinary(t), "decrypt", "--extract", `["data"]["admin-password"]`, p)
	cmd.Env = []string{"SOPS_AGE_KEY=" + c.id.String(), "HOME=" + dir}
	plain, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sops decrypt: %v: %s", err, plain)
	}
	if len(plain) < 50 { // base64 of 40 characters
		t.Errorf("the decrypted password is %q", plain)
	}
	record := c.dstGit("show", "env/dev:apps/grafana/.sluice.yaml")
	for _, want := range []string{"generated:", "template: grafana/templates/secret.yaml", "- randAlphaNum", "lookups:", "secrets:", "object: Secret monitoring/grafana", "committed: encrypted"} {
		if !strings.Contains(record, want) {
			t.Errorf("the record lacks %q:\n%s", want, record)
		}
	}
	if strings.Contains(record, strings.TrimSpace(string(plain))) {
		t.Error("the record holds the password")
	}
	// redis's password, from bitnami's common library, and the
	// StatefulSets' checksum of it.
	sts := c.objectsOf("apps/redis")
	if !strings.Contains(sts["Secret/cache-redis"], "redis-password: ENC[") {
		t.Errorf("redis's Secret is not encrypted:\n%s", sts["Secret/cache-redis"])
	}
}

// Without the sync key a sync whose objects hold generated values fails
// saying how to pass it, and commits nothing; a chart whose only
// generated values are in the tests it leaves out needs none. Another key
// (or the rotation annotation) gives other passwords.
func TestWithoutTheSyncKeyNothingGeneratedIsCommitted(t *testing.T) {
	c := newChartFixture(t)
	rep := c.run() // no key
	for _, name := range []string{"grafana", "redis"} {
		r := c.result(rep, name)
		if r.Result != Failed || !strings.Contains(r.Error, "--sync-key") || !strings.Contains(r.Error, "randAlphaNum") {
			t.Errorf("%s without a key: %s %s", name, r.Result, r.Error)
		}
	}
	if r := c.result(rep, "podinfo"); r.Result != Committed {
		t.Errorf("podinfo, whose tests alone generate, without a key: %s %s", r.Result, r.Error)
	}
	if strings.Contains(c.dstGit("ls-tree", "-r", "--name-only", "env/dev"), "apps/grafana") {
		t.Error("grafana's folder was committed without a key")
	}
	if err := c.hydrate().Err(); err != nil {
		t.Fatal(err)
	}
	first := c.objectsOf("apps/grafana")["Deployment/grafana"]
	c.sync("grafana", strings.Replace(c.syncFile("grafana"), "metadata: {name: grafana}", "metadata: {name: grafana, annotations: {sluice.dev/rotate-generated: \"2\"}}", 1))
	if err := c.hydrate().Err(); err != nil {
		t.Fatal(err)
	}
	rotated := c.objectsOf("apps/grafana")["Deployment/grafana"]
	if first == rotated {
		t.Error("the rotation annotation changed nothing: the Deployment's checksum of its Secret is the same")
	}
}

func (c *chartFixture) syncFile(name string) string {
	c.t.Helper()
	data, err := os.ReadFile(filepath.Join(c.syncDir, name+".yaml"))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(data)
}

// A recipient that cannot be used (a Vault nobody answers at) fails the
// sync naming the setting, and the folder stays as it was; a template
// whose output cannot be made stable (a DSA key) fails its sync naming
// the template, and nothing of it is committed.
func TestWhatCannotBeSealedOrStableIsNotCommitted(t *testing.T) {
	c := newChartFixture(t)
	if err := c.hydrate().Err(); err != nil {
		t.Fatal(err)
	}
	tip := c.dstGit("rev-parse", "env/dev")
	c.sync("grafana", strings.Replace(c.syncFile("grafana"), "sops: {age: ["+c.id.Recipient().String()+"]}", "sops: {hcVaultTransit: [\"http://127.0.0.1:1/v1/transit/keys/sluice\"]}", 1))
	r := c.result(c.hydrate(), "grafana")
	if r.Result != Failed || !strings.Contains(r.Error, "spec.destination.sops.hcVaultTransit[0]") {
		t.Fatalf("an unreachable Vault: %s %s", r.Result, r.Error)
	}
	if got := c.dstGit("rev-parse", "env/dev"); got != tip {
		t.Fatal("the branch moved")
	}

	c.app.Write(map[string]string{
		"charts/keys/Chart.yaml":         "apiVersion: v2\nname: keys\nversion: 0.1.0\n",
		"charts/keys/templates/key.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keys}\ndata:\n  key: {{ genPrivateKey \"dsa\" | quote }}\n",
	}).Commit("a DSA key")
	c.app.Push("main")
	c.sync("keys", "apiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: keys}\nspec:\n  source: {repo: APP, ref: main, path: charts/keys}\n  destination: {repo: DST, branch: env/dev, path: apps/keys}\n")
	r = c.result(c.hydrate(), "keys")
	if r.Result != Failed || !strings.Contains(r.Error, "keys/templates/key.yaml") || !strings.Contains(r.Error, "cannot be made the same at every render") {
		t.Fatalf("a DSA key: %s %s", r.Result, r.Error)
	}
	if strings.Contains(c.dstGit("ls-tree", "-r", "--name-only", "env/dev"), "apps/keys") {
		t.Fatal("the DSA key's folder was committed")
	}
}
