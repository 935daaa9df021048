package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/testenv"
)

// helmCase is one `helm template` invocation and the same render through
// Sluice.
type helmCase struct {
	name        string
	chart       string // under testdata/charts
	release     string
	namespace   string
	values      []string // relative to the chart, as valuesFiles are
	inline      string   // JSON, as render.helm.values
	kubeVersion string
	apiVersions []string
	crds        bool
}

// args are helm's; inline values go into a file given last, as a sync's
// render.helm.values merge over its values files.
func (c helmCase) args(t *testing.T) []string {
	args := []string{"template", c.release, filepath.Join("testdata/charts", c.chart), "--namespace", c.namespace}
	for _, v := range c.values {
		args = append(args, "-f", filepath.Join("testdata/charts", c.chart, v))
	}
	if c.inline != "" {
		p := filepath.Join(t.TempDir(), "inline.json")
		if err := os.WriteFile(p, []byte(c.inline), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-f", p)
	}
	if c.kubeVersion != "" {
		args = append(args, "--kube-version", c.kubeVersion)
	}
	for _, a := range c.apiVersions {
		args = append(args, "--api-versions", a)
	}
	if c.crds {
		args = append(args, "--include-crds")
	}
	return args
}

func (c helmCase) render(t *testing.T) (*Result, error) {
	t.Helper()
	fsys, err := source.Dir("testdata/charts")
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	h := &v1alpha1.HelmRender{ReleaseName: c.release, Namespace: c.namespace, ValuesFiles: c.values,
		KubeVersion: c.kubeVersion, APIVersions: c.apiVersions, IncludeCRDs: c.crds}
	if c.inline != "" {
		h.Values = &apiextensionsv1.JSON{Raw: []byte(c.inline)}
	}
	return Render(context.Background(), fsys, c.chart, Options{Render: &v1alpha1.Render{Helm: h}})
}

// runHelm runs the reference binary with no user configuration of this
// machine (kubeconfig, repositories, plugins) in reach.
func runHelm(t *testing.T, bin string, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "none"), "HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

func TestChartsRenderAsTheHelmReleaseBinary(t *testing.T) {
	bin := testenv.HelmBinary(t)
	tests := []helmCase{
		{name: "podinfo defaults", chart: "podinfo", release: "podinfo", namespace: "default"},
		{name: "podinfo for production on an older cluster with the Prometheus operator", chart: "podinfo", release: "web", namespace: "shop",
			values: []string{"values-prod.yaml"}, inline: `{"serviceMonitor":{"enabled":true},"hpa":{"enabled":true}}`,
			kubeVersion: "1.29.4", apiVersions: []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}},
		{name: "ghost with mysql and bitnami's common library (tpl, required, lookup, schema)", chart: "bitnami/ghost", release: "blog", namespace: "blog",
			values: []string{"../../values/ghost.yaml"}},
		{name: "apisix with etcd and its CRDs", chart: "bitnami/apisix", release: "gateway", namespace: "ingress", crds: true},
		{name: "what the chart is told of the cluster, by default", chart: "capabilities", release: "caps", namespace: "default"},
		{name: "sprig's conversions where spf13/cast versions differ", chart: "conversions", release: "conv", namespace: "default"},
		{name: "what the chart is told of the cluster, as asked", chart: "capabilities", release: "caps", namespace: "default",
			kubeVersion: "v1.31.2-gke.1200", apiVersions: []string{"monitoring.coreos.com/v1/ServiceMonitor"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args(t)
			out, err := runHelm(t, bin, args...)
			if err != nil {
				t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
			}
			want, err := kio.FromBytes(out)
			if err != nil {
				t.Fatal(err)
			}
			// Some charts make random values (a test pod's name, a key):
			// what two runs of helm itself do not agree on is left out.
			again, err := runHelm(t, bin, args...)
			if err != nil {
				t.Fatal(err)
			}
			wantAgain, err := kio.FromBytes(again)
			if err != nil {
				t.Fatal(err)
			}
			res, err := tt.render(t)
			if err != nil {
				t.Fatalf("sluice: %v", err)
			}
			if len(objects(t, res)) != len(want) {
				t.Fatalf("sluice renders %d objects, helm %d:\n%v\n%v", len(objects(t, res)), len(want), ids(objects(t, res)), ids(want))
			}
			for i := range want {
				random := differingPaths(t, want[i], wantAgain[i])
				g, w := masked(t, objects(t, res)[i], random), masked(t, want[i], random)
				if g != w {
					t.Errorf("object %d differs:\n--- sluice\n%s\n--- helm\n%s", i, g, w)
				}
			}
		})
	}
}

func TestHelmRefusesWhatTheHelmReleaseBinaryRefuses(t *testing.T) {
	bin := testenv.HelmBinary(t)
	tests := []struct {
		helmCase
		want string // in both errors
	}{
		{helmCase{chart: "library", release: "lib", namespace: "default"}, "library charts are not installable"},
		{helmCase{chart: "capabilities", release: "Not_A_Name", namespace: "default"}, "invalid release name"},
		{helmCase{chart: "capabilities", release: strings.Repeat("r", 54), namespace: "default"}, "the length must not be longer than 53"},
		{helmCase{chart: "capabilities", release: "old", namespace: "default", kubeVersion: "1.24.0"}, "chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.24.0"},
		{helmCase{chart: "bitnami/ghost", release: "blog", namespace: "blog", values: []string{"../../values/ghost.yaml"}, inline: `{"ghostEmail":5}`}, "at '/ghostEmail': got number, want string"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if _, err := runHelm(t, bin, tt.args(t)...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("helm: %v; want an error with %q", err, tt.want)
			}
			_, err := tt.render(t)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("sluice: %v; want an error with %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "chart "+filepath.Base(tt.chart)) {
				t.Errorf("sluice's error does not name the chart: %v", err)
			}
		})
	}
}

func TestHelmVersionsFollowGoMod(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-json", "helm.sh/helm/v4").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var m struct{ Version, GoMod string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != helmVersion {
		t.Errorf("go.mod has helm %s, helmVersion says %s: update helmcaps.go", m.Version, helmVersion)
	}
	gomod, err := os.ReadFile(m.GoMod)
	if err != nil {
		t.Fatal(err)
	}
	client := ""
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/client-go" {
			client = f[1]
		}
	}
	// helm's rule: client-go v0.N.x is Kubernetes 1.N.
	v, err := semver.NewVersion(client)
	if err != nil {
		t.Fatalf("helm's go.mod: client-go %q: %v", client, err)
	}
	minor := fmt.Sprint(v.Minor())
	if want := "v1." + minor + ".0"; want != helmKubeVersion || "v1."+minor != helmKubeClientVersion {
		t.Errorf("helm %s is built with client-go %s, so defaults to Kubernetes %s; helmKubeVersion says %s", m.Version, client, want, helmKubeVersion)
	}
}

// differingPaths lists the scalar fields two renders of one object do not
// agree on.
func differingPaths(t *testing.T, a, b *yaml.RNode) map[string]bool {
	t.Helper()
	fa, fb := flatten(t, a), flatten(t, b)
	out := map[string]bool{}
	for k, v := range fa {
		if fb[k] != v {
			out[k] = true
		}
	}
	return out
}

func flatten(t *testing.T, n *yaml.RNode) map[string]string {
	t.Helper()
	var v any
	data, err := n.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return testenv.Fields(v)
}

// masked prints an object's fields, sorted, with the random ones masked.
func masked(t *testing.T, n *yaml.RNode, random map[string]bool) string {
	t.Helper()
	f := flatten(t, n)
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := f[k]
		if random[k] {
			v = "<random>"
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	return b.String()
}
