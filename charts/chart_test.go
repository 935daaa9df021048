// Package charts holds the tests of Sluice's Helm chart (charts/sluice),
// with the real helm and kustomize binaries `make tools` builds.
package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { testenv.RunWithControlPlane(m, &cp) }

const chart = "sluice"

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testenv.HelmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// objects parses a stream of YAML documents, by "Kind/name".
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		if len(o) == 0 {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		out[fmt.Sprintf("%s/%s", o["kind"], meta["name"])] = o
	}
	return out
}

// The chart's defaults install what `kubectl apply -k config/default`
// does, object for object and field for field, less what Helm adds (its
// labels, the CRDs kept on uninstall) and the Namespace (helm install
// --create-namespace makes it): the two installs cannot drift.
func TestTheChartIsTheKustomizeInstall(t *testing.T) {
	out, err := helm(t, "template", "sluice", chart, "--namespace", "sluice-system")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	fromChart := objects(t, out)
	kust, err := exec.Command(testenv.KustomizeBinary(t), "build", "../config/default").CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build: %v\n%s", err, kust)
	}
	fromConfig := objects(t, string(kust))
	delete(fromConfig, "Namespace/sluice-system")
	for _, o := range fromChart {
		meta := o["metadata"].(map[string]any)
		if labels, ok := meta["labels"].(map[string]any); ok {
			delete(labels, "app.kubernetes.io/managed-by")
			delete(labels, "helm.sh/chart")
			if len(labels) == 0 {
				delete(meta, "labels")
			}
		}
		if anns, ok := meta["annotations"].(map[string]any); ok && o["kind"] == "CustomResourceDefinition" {
			if anns["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s: not kept on uninstall", meta["name"])
			}
			delete(anns, "helm.sh/resource-policy")
			if len(anns) == 0 {
				delete(meta, "annotations")
			}
		}
		// The kustomize install sets the namespace on every namespaced
		// object; helm install puts them in the release's.
		if want, ok := fromConfig[fmt.Sprintf("%s/%s", o["kind"], meta["name"])]; ok {
			if ns, ok := want["metadata"].(map[string]any)["namespace"]; ok {
				meta["namespace"] = ns
			}
		}
	}
	keys := func(m map[string]map[string]any) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		sort.Strings(k)
		return k
	}
	if !reflect.DeepEqual(keys(fromChart), keys(fromConfig)) {
		t.Fatalf("the chart makes %q; config/default %q", keys(fromChart), keys(fromConfig))
	}
	for name, want := range fromConfig {
		got := fromChart[name]
		if !reflect.DeepEqual(normal(t, got), normal(t, want)) {
			g, _ := yaml.Marshal(got)
			w, _ := yaml.Marshal(want)
			t.Errorf("%s differs:\nchart:\n%s\nconfig/default:\n%s", name, g, w)
		}
	}
}

// normal is an object as JSON reads it back (numbers alike).
func normal(t *testing.T, o map[string]any) any {
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal(data, &v)
	return v
}

// The chart's CRDs and ClusterRole are config/'s, as make generate
// copies them.
func TestTheChartsCopiesAreCurrent(t *testing.T) {
	pairs := map[string]string{"../config/rbac/role.yaml": chart + "/files/role.yaml",
		"../config/monitoring/rules.yaml": chart + "/files/monitoring/rules.yaml", "../config/monitoring/dashboard.json": chart + "/files/monitoring/dashboard.json"}
	bases, _ := filepath.Glob("../config/crd/bases/*.yaml")
	for _, b := range bases {
		pairs[b] = filepath.Join(chart, "files/crds", filepath.Base(b))
	}
	copies, _ := filepath.Glob(chart + "/files/crds/*.yaml")
	if len(copies) != len(bases) {
		t.Errorf("the chart has %d CRDs, config/crd/bases %d: make generate", len(copies), len(bases))
	}
	for src, dst := range pairs {
		a, err1 := os.ReadFile(src)
		b, err2 := os.ReadFile(dst)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not %s: make generate (%v %v)", dst, src, err1, err2)
		}
	}
}

// The alerts, as the chart's PrometheusRule and the kustomize install's
// carry them, are what config/monitoring/rules.yaml says, and Prometheus's
// own promtool accepts them and passes their unit tests (each alert fires
// on the series it is for, and not on a healthy one). The dashboard is
// the chart's ConfigMap as it is the file.
func TestTheMonitoringRulesAndDashboard(t *testing.T) {
	rules, err := os.ReadFile("../config/monitoring/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := yaml.Unmarshal(rules, &want); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "sluice", chart, "--namespace", "sluice-system",
		"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs := objects(t, out)
	rule := objs["PrometheusRule/sluice-controller"]
	kust, err := os.ReadFile("../config/monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kustRule map[string]any
	if err := yaml.Unmarshal(kust, &kustRule); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]map[string]any{"the chart's PrometheusRule": rule, "config/monitoring/prometheusrule.yaml": kustRule} {
		if r == nil || !reflect.DeepEqual(r["spec"], want) {
			t.Errorf("%s is not config/monitoring/rules.yaml: make generate\n%v", name, r)
		}
	}
	// promtool on what the chart installs.
	dir := t.TempDir()
	spec, err := yaml.Marshal(rule["spec"])
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("../config/monitoring/rules.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644)
	os.WriteFile(filepath.Join(dir, "rules.test.yaml"), tests, 0o644)
	promtool := testenv.PromtoolBinary(t)
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	dash, err := os.ReadFile("../config/monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	cm := objs["ConfigMap/sluice-grafana-dashboard"]
	if cm == nil {
		t.Fatal("no dashboard ConfigMap with metrics.grafanaDashboard.enabled")
	}
	if got := cm["data"].(map[string]any)["sluice.json"]; got != string(dash) {
		t.Errorf("the dashboard ConfigMap's sluice.json is not config/monitoring/dashboard.json")
	}
	if cm["metadata"].(map[string]any)["labels"].(map[string]any)["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap lacks the label Grafana's sidecar loads")
	}
}

func TestTheChartLints(t *testing.T) {
	out, err := helm(t, "lint", "--strict", chart)
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// Values that cannot work fail at helm install, naming the value.
func TestTheChartRefusesValuesThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"shards[0].name=team-a"}, "selector"},
		{[]string{"shards[0].name=team-a", "shards[0].selector=", "shards[1].name=rest", "shards[1].selector=x"}, "shards/0/selector"},
		{[]string{"dashboard.enabled=true", "dashboard.ingress.enabled=true", "dashboard.ingress.host=sluice.example.com"}, "dashboard.ingress.enabled"},
		{[]string{"renderMemoryLimit=128Mi"}, "renderMemoryLimit 128Mi"},
		{[]string{"renderMemoryLimit=lots"}, "renderMemoryLimit"},
		{[]string{"replicas=2", "leaderElection=false"}, "leaderElection"},
		{[]string{"logLevel=loud"}, "logLevel"},
		{[]string{"shard.selector=x"}, "shard"},
		{[]string{"signing.keyless=true"}, "signing.keyless"},
	} {
		args := []string{"template", "sluice", chart}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		out, err := helm(t, args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: %v, want a refusal naming %q:\n%s", strings.Join(tc.set, " --set "), err, tc.want, out)
		}
	}
	// And values that work, render.
	out, err := helm(t, "template", "sluice", chart, "--set", "shards[0].name=team-a", "--set", "shards[0].selector=sluice.dev/shard=team-a",
		"--set", "shards[1].name=rest", "--set", "shards[1].selector=!sluice.dev/shard", "--set", "dashboard.enabled=true",
		"--set", "dashboard.userHeader=X-Forwarded-User", "--set", "dashboard.ingress.enabled=true", "--set", "dashboard.ingress.host=sluice.example.com",
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true", "--set", "webhooks.ingress.enabled=true", "--set", "webhooks.ingress.host=hooks.example.com",
		"--set", "signing.keyless.enabled=true")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	objs := objects(t, out)
	// Keyless signing: the service account's token of audience sigstore,
	// projected where --identity-token-file reads it.
	var pod struct {
		Spec struct {
			Containers []struct {
				Args         []string
				VolumeMounts []struct{ Name, MountPath string } `json:"volumeMounts"`
			}
			Volumes []struct {
				Name      string
				Projected *struct {
					Sources []struct {
						ServiceAccountToken *struct{ Path, Audience string } `json:"serviceAccountToken"`
					}
				}
			}
		}
	}
	tmpl, _ := yaml.Marshal(objs["Deployment/sluice-controller-team-a"]["spec"].(map[string]any)["template"])
	if err := yaml.Unmarshal(tmpl, &pod); err != nil {
		t.Fatal(err)
	}
	projected := ""
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].ServiceAccountToken != nil && v.Projected.Sources[0].ServiceAccountToken.Audience == "sigstore" {
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name {
					projected = m.MountPath + "/" + v.Projected.Sources[0].ServiceAccountToken.Path
				}
			}
		}
	}
	if projected == "" || !slices.Contains(pod.Spec.Containers[0].Args, "--identity-token-file="+projected) {
		t.Errorf("signing.keyless.enabled: the token of audience sigstore at %q, args %v", projected, pod.Spec.Containers[0].Args)
	}
	for _, want := range []string{"Deployment/sluice-controller-team-a", "Deployment/sluice-controller-rest", "Ingress/sluice-dashboard", "Ingress/sluice-webhooks", "ServiceMonitor/sluice-controller", "PrometheusRule/sluice-controller"} {
		if objs[want] == nil {
			t.Errorf("with shards, the dashboard and monitoring: no %s", want)
		}
	}
	if !strings.Contains(out, "--watch-label-selector=!sluice.dev/shard") || !strings.Contains(out, "--dashboard-user-header=X-Forwarded-User") {
		t.Error("the shards' selectors or the proxy's header are not passed")
	}
}

// The real helm installs the chart onto an API server, and upgrades it
// from a previous version whose ManifestSync CRD lacks a field: the
// upgrade brings the field (CRDs are the chart's templates, not Helm's
// install-once crds/ folder), and the CRDs stay when it is uninstalled.
func TestTheChartInstallsAndUpgradesItsCRDs(t *testing.T) {
	ns := testenv.Namespace("chart")
	kube := cp.Kubeconfig
	prev := filepath.Join(t.TempDir(), "sluice")
	if err := os.CopyFS(prev, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	crdFile := filepath.Join(prev, "files/crds/sluice.dev_manifestsyncs.yaml")
	crd, _ := os.ReadFile(crdFile)
	var c map[string]any
	yaml.Unmarshal(crd, &c)
	props := c["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	if _, ok := props["prune"]; !ok {
		t.Fatal("the ManifestSync CRD has no spec.prune to leave out")
	}
	delete(props, "prune")
	crd, _ = yaml.Marshal(c)
	os.WriteFile(crdFile, crd, 0o644)
	chartYAML, _ := os.ReadFile(filepath.Join(prev, "Chart.yaml"))
	os.WriteFile(filepath.Join(prev, "Chart.yaml"), bytes.Replace(chartYAML, []byte("version: 0.1.0"), []byte("version: 0.0.9"), 1), 0o644)

	s := runtime.NewScheme()
	clientgoscheme.AddToScheme(s)
	apiextensionsv1.AddToScheme(s)
	kc, err := client.New(cp.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	// The control plane comes with Sluice's CRDs (as the other tests
	// want them): the chart installs its own.
	for _, name := range []string{"manifestsyncs.sluice.dev", "images.sluice.dev", "repoconfigs.sluice.dev"} {
		if err := kc.Delete(context.Background(), &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitGone(t, kc)
	if out, err := helm(t, "install", "sluice", prev, "--kubeconfig", kube, "--namespace", ns, "--create-namespace"); err != nil {
		t.Fatalf("helm install (previous): %v\n%s", err, out)
	}
	hasPrune := func() bool {
		var got apiextensionsv1.CustomResourceDefinition
		if err := kc.Get(context.Background(), client.ObjectKey{Name: "manifestsyncs.sluice.dev"}, &got); err != nil {
			t.Fatal(err)
		}
		_, ok := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["prune"]
		return ok
	}
	if hasPrune() {
		t.Fatal("the previous version's CRD has spec.prune")
	}
	if out, err := helm(t, "upgrade", "sluice", chart, "--kubeconfig", kube, "--namespace", ns); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if !hasPrune() {
		t.Error("the upgrade did not bring the CRD's spec.prune")
	}
	var d appsv1.Deployment
	if err := kc.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "sluice-controller"}, &d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/sluice-dev/sluice:v0.1.0" {
		t.Errorf("the Deployment runs %s", img)
	}
	if out, err := helm(t, "uninstall", "sluice", "--kubeconfig", kube, "--namespace", ns); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	// Kept: not deleted, nor being deleted.
	var kept apiextensionsv1.CustomResourceDefinition
	if err := kc.Get(context.Background(), client.ObjectKey{Name: "manifestsyncs.sluice.dev"}, &kept); err != nil || kept.DeletionTimestamp != nil {
		t.Errorf("the CRD went with the release (%v, deleting since %v)", err, kept.DeletionTimestamp)
	}
}

// waitGone waits for Sluice's CRDs to be deleted.
func waitGone(t *testing.T, kc client.Client) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var list apiextensionsv1.CustomResourceDefinitionList
		if err := kc.List(context.Background(), &list); err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, c := range list.Items {
			if c.Spec.Group == "sluice.dev" {
				left++
			}
		}
		if left == 0 {
			return
		}
	}
	t.Fatal("Sluice's CRDs were not deleted within 30 s")
}
