package sandbox

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"sluice.dev/sluice/internal/render"
)

// overlay is one of the bench monorepo's overlays: a namespace, a name
// prefix, labels, an image tag and a replicas patch over a base.
var overlay = mapFS{
	"base/kustomization.yaml":    "resources: [deploy.yaml, svc.yaml]\n",
	"base/deploy.yaml":           "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: web, image: reg/web:1}]\n",
	"base/svc.yaml":              "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n",
	"overlay/kustomization.yaml": "namespace: dev\nnamePrefix: dev-\nlabels: [{pairs: {team: a}}]\nresources: [../base]\npatches:\n- path: replicas.yaml\nimages: [{name: reg/web, newTag: \"2\"}]\n",
	"overlay/replicas.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
}

func cpuOf(ru syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRenderInAWorker is the cost of isolation per render: this
// process's CPU and its workers', per render.
func BenchmarkRenderInAWorker(b *testing.B) {
	exe, _ := os.Executable()
	s, err := New(Options{Command: []string{exe, WorkerArg}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fsys := overlay.fs()
	var self0, kids0, self1, kids1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
	b.ResetTimer()
	for range b.N {
		if _, err := s.Render(context.Background(), fsys, "overlay", render.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
	b.ReportMetric(float64(cpuOf(self1)-cpuOf(self0))/float64(b.N)/1e6, "host-cpu-ms/op")
	b.ReportMetric(float64(cpuOf(kids1)-cpuOf(kids0))/float64(b.N)/1e6, "worker-cpu-ms/op")
}

func BenchmarkWorkerVariants(b *testing.B) {
	exe, _ := os.Executable()
	for _, v := range []struct {
		name string
		env  []string
		dir  string
	}{
		{"overlay", nil, "overlay"},
		{"overlay-procs1", []string{"GOMAXPROCS=1"}, "overlay"},
		{"overlay-gcoff", []string{"GOGC=off"}, "overlay"},
		{"overlay-gc100", []string{"GOGC=100"}, "overlay"},
		{"overlay-gc50", []string{"GOGC=50"}, "overlay"},
		{"plain", nil, "base-plain"},
	} {
		b.Run(v.name, func(b *testing.B) {
			s, _ := New(Options{Command: []string{exe, WorkerArg}, Env: v.env})
			defer s.Close()
			fs := overlay
			fs["base-plain/deploy.yaml"] = overlay["base/deploy.yaml"]
			fsys := fs.fs()
			var k0, k1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &k0)
			for range b.N {
				if _, err := s.Render(context.Background(), fsys, v.dir, render.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &k1)
			b.ReportMetric(float64(cpuOf(k1)-cpuOf(k0))/float64(b.N)/1e6, "worker-cpu-ms/op")
			b.ReportMetric(float64(k1.Stime.Nano()-k0.Stime.Nano())/float64(b.N)/1e6, "worker-sys-ms/op")
			b.ReportMetric(float64(k1.Minflt-k0.Minflt)/float64(b.N), "faults/op")
		})
	}
}

// BenchmarkRenderInAWarmWorker is the cost of isolation per render when
// renders of one domain share warm workers, against the same render in
// this process: this process's CPU and its workers' (reset and check
// included: counted once the workers end, at Close).
func BenchmarkRenderInAWarmWorker(b *testing.B) {
	exe, _ := os.Executable()
	fsys := overlay.fs()
	b.Run("in-process", func(b *testing.B) {
		var self0, self1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
		for range b.N {
			if _, err := render.Render(context.Background(), fsys, "overlay", render.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
		b.ReportMetric(float64(cpuOf(self1)-cpuOf(self0))/float64(b.N)/1e6, "cpu-ms/op")
	})
	b.Run("warm", func(b *testing.B) {
		s, err := New(Options{Command: []string{exe, WorkerArg}})
		if err != nil {
			b.Fatal(err)
		}
		d := Domain{Namespace: "bench", Source: "repo@1"}
		var self0, kids0, self1, kids1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids0)
		for range b.N {
			if _, err := s.RenderIn(context.Background(), d, fsys, "overlay", render.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
		syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids1)
		b.ReportMetric(float64(cpuOf(self1)-cpuOf(self0))/float64(b.N)/1e6, "host-cpu-ms/op")
		b.ReportMetric(float64(cpuOf(kids1)-cpuOf(kids0))/float64(b.N)/1e6, "worker-cpu-ms/op")
	})
}
