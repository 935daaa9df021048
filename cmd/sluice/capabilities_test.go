package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/testenv"
)

// capabilitiesChart renders what it is told of the cluster into a
// ConfigMap.
var capabilitiesChart = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: caps\nversion: 0.1.0\nkubeVersion: \">=1.25.0-0\"\n",
	"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: caps}
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  flux: {{ .Capabilities.APIVersions.Has "kustomize.toolkit.fluxcd.io/v1/Kustomization" | quote }}
  monitoring: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" | quote }}
`,
}

func TestChartsAreToldOfTheClusterTheyAreAppliedTo(t *testing.T) {
	dir := writeTree(t, capabilitiesChart)
	// Rendered alone, as `helm template`: helm's defaults.
	out, stderr, code := run(t, "render", dir)
	if code != 0 || !strings.Contains(out, `kubeVersion: "v1.37.0"`) || !strings.Contains(out, `flux: "false"`) {
		t.Fatalf("render: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code = run(t, "render", dir, "--kube-version", "1.30.2", "--api-versions", "monitoring.coreos.com/v1")
	if code != 0 || !strings.Contains(out, `kubeVersion: "v1.30.2"`) || !strings.Contains(out, `monitoring: "true"`) {
		t.Fatalf("render --kube-version --api-versions: exit %d\n%s", code, out)
	}
	if _, stderr, code := run(t, "render", dir, "--kube-version", "1.24.0"); code != 2 || !strings.Contains(stderr, "chart caps: chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.24.0") {
		t.Errorf("too old: exit %d\n%s", code, stderr)
	}

	// Applied, as `helm install`: the cluster's version and API groups
	// (the test cluster serves the Flux CRDs).
	ns := testenv.Namespace("caps")
	kc := "--kubeconfig=" + cp.Kubeconfig
	if _, stderr, code := run(t, "apply", writeTree(t, map[string]string{"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n"}), kc); code != 0 {
		t.Fatal(stderr)
	}
	kube, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := func() map[string]string {
		t.Helper()
		var cm corev1.ConfigMap
		if err := kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "caps"}, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	if _, stderr, code := run(t, "apply", dir, kc, "-n", ns); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, stderr)
	}
	if d := data(); d["kubeVersion"] != "v1.37.2" || d["flux"] != "true" || d["monitoring"] != "false" {
		t.Errorf("applied with %v; want the cluster's v1.37.2, and its Flux group", d)
	}
	if _, stderr, code := run(t, "apply", dir, kc, "-n", ns, "--kube-version", "1.33.0", "-a", "monitoring.coreos.com/v1"); code != 0 {
		t.Fatalf("apply --kube-version: exit %d\n%s", code, stderr)
	}
	if d := data(); d["kubeVersion"] != "v1.33.0" || d["flux"] != "true" || d["monitoring"] != "true" {
		t.Errorf("applied with %v; want 1.33.0, the cluster's groups and monitoring", d)
	}
}
