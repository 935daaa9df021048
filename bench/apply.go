package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sluice.dev/sluice/internal/devcluster"
)

func mainApply() {
	n := flag.Int("n", 10, "repetitions of each reapply (the median is reported)")
	write := flag.String("write", "", "only write the 60-object kustomization into this directory")
	flag.Parse()
	if *write != "" {
		kustomization60(*write, "bench", "bench.example.com")
		return
	}
	tb := newTB()
	defer tb.cleanup()
	if err := runApply(tb, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

// kustomization60 writes a 60-object kustomization: a Namespace, a CRD and
// 5 of its resources, 18 Deployments, 18 Services and 17 ConfigMaps.
func kustomization60(dir, ns, group string) {
	files := map[string]string{}
	res := []string{"namespace.yaml", "crd.yaml"}
	files["namespace.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)
	files["crd.yaml"] = fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.%[1]s}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group)
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("gadget-%d.yaml", i)
		files[name] = fmt.Sprintf("apiVersion: %s/v1\nkind: Gadget\nmetadata: {name: g%d}\nspec: {size: %d}\n", group, i, i)
		res = append(res, name)
	}
	for i := 0; i < 18; i++ {
		name := fmt.Sprintf("app-%02d.yaml", i)
		files[name] = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: app-%02[1]d}
spec:
  replicas: 2
  selector: {matchLabels: {app: app-%02[1]d}}
  template:
    metadata: {labels: {app: app-%02[1]d}}
    spec:
      containers:
      - name: app
        image: registry.example.com/team/app-%02[1]d:1.0.0
        ports: [{containerPort: 8080}]
        resources: {requests: {cpu: 10m, memory: 32Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: app-%02[1]d}
spec:
  selector: {app: app-%02[1]d}
  ports: [{port: 80, targetPort: 8080}]
`, i)
		res = append(res, name)
	}
	for i := 0; i < 17; i++ {
		name := fmt.Sprintf("config-%02d.yaml", i)
		files[name] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config-%02d}\ndata: {value: \"0\"}\n", i)
		res = append(res, name)
	}
	k := "namespace: " + ns + "\nresources:\n"
	for _, r := range res {
		k += "- " + r + "\n"
	}
	files["kustomization.yaml"] = k
	os.MkdirAll(dir, 0o755)
	for name, content := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	}
}

func runApply(tb *benchTB, n int) error {
	work := tb.TempDir()
	bin, kubectl, err := tools(work)
	if err != nil {
		return err
	}
	c, err := devcluster.Start(context.Background(), devcluster.Options{WithoutCRDs: true, Dir: work, Build: true})
	if err != nil {
		return err
	}
	defer c.Stop()
	kc := "--kubeconfig=" + c.Kubeconfig
	type tool struct {
		name  string
		dir   string
		apply func() (measurement, string, error)
	}
	sDir, kDir := filepath.Join(work, "sluice-set"), filepath.Join(work, "kubectl-set")
	kustomization60(sDir, "bench-sluice", "sluice.bench.example.com")
	kustomization60(kDir, "bench-kubectl", "kubectl.bench.example.com")
	tools := []tool{
		{"sluice apply", sDir, func() (measurement, string, error) {
			return timed("", bin, "apply", sDir, kc, "--inventory", "bench")
		}},
		{"kubectl apply --server-side -k", kDir, func() (measurement, string, error) {
			return timed("", kubectl, "apply", "--server-side", "-k", kDir, kc)
		}},
	}
	results := map[string][3]measurement{}
	for _, t := range tools {
		var r [3]measurement
		m, out, err := t.apply()
		if err != nil && t.name != "sluice apply" {
			// kubectl cannot apply custom resources in the run that creates
			// their CRD: like its users, run it again.
			m2, out2, err2 := t.apply()
			m.wall, m.cpu, m.note = m.wall+m2.wall, m.cpu+m2.cpu, "two runs: the first fails on the custom resources"
			out, err = out2, err2
		}
		if err != nil {
			return fmt.Errorf("%s: first apply: %w\n%s", t.name, err, tail(out))
		}
		r[0] = m
		var noop, change []measurement
		for i := 0; i < n; i++ {
			m, out, err := t.apply()
			if err != nil {
				return fmt.Errorf("%s: reapply: %w\n%s", t.name, err, tail(out))
			}
			noop = append(noop, m)
			os.WriteFile(filepath.Join(t.dir, "config-07.yaml"), []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config-07}\ndata: {value: \"%d\"}\n", i+1)), 0o644)
			if m, out, err = t.apply(); err != nil {
				return fmt.Errorf("%s: change: %w\n%s", t.name, err, tail(out))
			}
			change = append(change, m)
		}
		r[1], r[2] = median(noop), median(change)
		results[t.name] = r
	}
	s, k := results["sluice apply"], results["kubectl apply --server-side -k"]
	fmt.Printf("A 60-object kustomization (Namespace, CRD + 5 custom resources, 18 Deployments, 18 Services, 17 ConfigMaps) on a local kube-apiserver %s; reapplies are the median of %d.\n\n", "v1.37.2", n)
	fmt.Println("| run | sluice apply | kubectl apply --server-side -k | kubectl / sluice |")
	fmt.Println("|---|---:|---:|---:|")
	for i, name := range []string{"first apply", "no-op reapply", "reapply, one ConfigMap changed"} {
		fmt.Printf("| %s | %s | %s | %.1fx |\n", name, round(s[i].wall), round(k[i].wall), float64(k[i].wall)/float64(s[i].wall))
	}
	if k[0].note != "" {
		fmt.Printf("\nkubectl's first apply: %s.\n", k[0].note)
	}
	fmt.Printf("\nTargets: no-op reapply under 150 ms (%s) and at least 3x faster than kubectl's (%.1fx); a one-object change under 250 ms (%s).\n",
		round(s[1].wall), float64(k[1].wall)/float64(s[1].wall), round(s[2].wall))
	return nil
}

func median(ms []measurement) measurement {
	sort.Slice(ms, func(i, j int) bool { return ms[i].wall < ms[j].wall })
	return ms[len(ms)/2]
}
