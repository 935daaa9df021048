package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// monorepo lays out the synthetic source repository.
func monorepo(reg string, nOverlays, nBases, nCharts int) map[string]string {
	files := map[string]string{"README.md": "# synthetic monorepo\n"}
	for b := 0; b < nBases; b++ {
		svc := fmt.Sprintf("svc%02d", b)
		dir := "bases/" + svc + "/"
		files[dir+"kustomization.yaml"] = "resources: [deployment.yaml, service.yaml]\nconfigMapGenerator:\n- name: " + svc + "\n  literals: [MODE=base]\n"
		files[dir+"deployment.yaml"] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: app
        image: %[2]s/team/%[1]s:latest
        envFrom: [{configMapRef: {name: %[1]s}}]
        resources: {requests: {cpu: 10m, memory: 32Mi}}
`, svc, reg)
		files[dir+"service.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %[1]s}\nspec:\n  selector: {app: %[1]s}\n  ports: [{port: 80, targetPort: 8080}]\n", svc)
	}
	for o := 0; o < nOverlays; o++ {
		svc := fmt.Sprintf("svc%02d", o%nBases)
		dir := fmt.Sprintf("overlays/o%03d/", o)
		files[dir+"kustomization.yaml"] = fmt.Sprintf(`namespace: team-%03d
namePrefix: o%03d-
labels:
- pairs: {overlay: o%03d, tier: bench}
resources: [../../bases/%s]
patches:
- path: replicas.yaml
images:
- name: %s/team/%s
  newTag: dev
`, o, o, o, svc, reg, svc)
		files[dir+"replicas.yaml"] = patch(svc, 1+o%5)
	}
	for c := 0; c < nCharts; c++ {
		name := fmt.Sprintf("chart%02d", c)
		dir := "charts/" + name + "/"
		files[dir+"Chart.yaml"] = "apiVersion: v2\nname: " + name + "\nversion: 1.0.0\n"
		files[dir+"values.yaml"] = fmt.Sprintf("replicas: 2\nimage: %s/team/%s:1.0.0\n", reg, name)
		files[dir+"templates/deployment.yaml"] = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {chart: {{ .Chart.Name }}}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
      - name: app
        image: {{ .Values.image }}
`
		files[dir+"templates/service.yaml"] = "apiVersion: v1\nkind: Service\nmetadata: {name: {{ .Release.Name }}}\nspec:\n  selector: {app: {{ .Release.Name }}}\n  ports: [{port: 80}]\n"
		files[dir+"templates/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}}\ndata: {replicas: \"{{ .Values.replicas }}\"}\n"
	}
	return files
}

func patch(svc string, replicas int) string {
	return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\nspec: {replicas: %d}\n", svc, replicas)
}

// writeSyncs writes one ManifestSync per overlay and per chart, all into
// one branch of dst.
func writeSyncs(dir, src, dst, reg string, nOverlays, nCharts int) {
	writeSyncsWith(dir, src, dst, reg, nOverlays, nCharts, "")
}

// writeSyncsWith writes the syncs with more of an image rule (rule: its
// lines after the name).
func writeSyncsWith(dir, src, dst, reg string, nOverlays, nCharts int, rule string) {
	os.MkdirAll(dir, 0o755)
	write := func(name, path, render string) {
		y := fmt.Sprintf(`apiVersion: sluice.dev/v1alpha1
kind: ManifestSync
metadata: {name: %[1]s}
spec:
  source: {repo: %[2]s, ref: main, path: %[3]s}
%[6]s  images:
  - name: %[4]s/team/*
%[7]s  destination: {repo: %[5]s, branch: env/bench, path: apps/%[1]s}
`, name, src, path, reg, dst, render, rule)
		os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(y), 0o644)
	}
	for o := 0; o < nOverlays; o++ {
		write(fmt.Sprintf("o%03d", o), fmt.Sprintf("overlays/o%03d", o), "")
	}
	for c := 0; c < nCharts; c++ {
		write(fmt.Sprintf("chart%02d", c), fmt.Sprintf("charts/chart%02d", c), "  render: {helm: {releaseName: r}}\n")
	}
}
