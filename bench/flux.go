package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/controller"
	"sluice.dev/sluice/internal/devcluster"
	"sluice.dev/sluice/internal/testenv"
)

// mainFlux reconciles the estate of `bench serve -kustomize` with Flux's
// own controllers instead (source-controller and kustomize-controller
// v1.9.6, as `make tools` builds them, at their default concurrency): a
// GitRepository per source repository and a Kustomization per app,
// applying it into a namespace per repository. What the API server
// spends per Kustomization, to hold against what it spends per
// ManifestSync in `bench serve` (issue 27).
func mainFlux() {
	syncs := flag.Int("syncs", 1000, "Kustomizations")
	repos := flag.Int("repos", 50, "source repositories (a GitRepository each)")
	tags := flag.Int("tags", 200, "image tags the apps name")
	interval := flag.Duration("interval", time.Minute, "the objects' interval (one idle interval is measured)")
	flag.Parse()
	tb := newTB()
	defer tb.cleanup()
	s := &serveBench{tb: tb, syncs: *syncs, repos: *repos, tags: *tags, branches: 1, interval: *interval, kustomize: true}
	if err := s.runFlux(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

const fluxNS = "flux-system"

var kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}

func (s *serveBench) runFlux() error {
	ctx := context.Background()
	if err := s.setUp(); err != nil {
		return err
	}
	n := s.appsPerRepo()
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: s.work, Build: true})
	if err != nil {
		return err
	}
	defer cl.Stop()
	cl.Config.QPS, cl.Config.Burst = 200, 400
	if s.c, err = client.New(cl.Config, client.Options{Scheme: controller.Scheme()}); err != nil {
		return err
	}
	for _, ns := range append([]string{fluxNS}, s.fluxNamespaces()...) {
		if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	// The bench reads the Kustomizations from a watch, as it reads the
	// ManifestSyncs in `bench serve`.
	ca, err := cache.New(cl.Config, cache.Options{Scheme: controller.Scheme(), DefaultNamespaces: map[string]cache.Config{fluxNS: {}}})
	if err != nil {
		return err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kustomizationGVK.GroupVersion().WithKind("KustomizationList"))
	informed := &unstructured.Unstructured{}
	informed.SetGroupVersionKind(kustomizationGVK)
	if _, err := ca.GetInformer(ctx, informed); err != nil {
		return err
	}
	cctx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	go ca.Start(cctx)
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("the bench's cache never synced")
	}
	api := apiServerOf(cl)
	testenv.StartFluxLogging(s.tb, cl.Kubeconfig, fluxNS, "info")
	flux := []int{childNamed("source-controll"), childNamed("kustomize-contr")}
	fluxCPU := func() time.Duration {
		var d time.Duration
		for _, pid := range flux {
			c, _ := procStat(pid)
			d += c
		}
		return d
	}
	fluxRSS := func() (kib int64) {
		for _, pid := range flux {
			kib += vmHWM(pid)
		}
		return kib
	}

	cpu0, apiReq0 := fluxCPU(), api.requests(ctx)
	apiCPU0, _ := procStat(api.pid)
	start := time.Now()
	objs := make(chan *unstructured.Unstructured)
	errs := make(chan error, s.syncs+s.repos)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range objs {
				if err := s.c.Create(ctx, o); err != nil {
					errs <- err
				}
			}
		}()
	}
	for r := 0; r < s.repos; r++ {
		objs <- fluxObject(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: src%02d, namespace: %s}
spec: {interval: %s, url: %q, ref: {branch: main}}
`, r, fluxNS, s.interval, s.srcURLs[r]))
		for a := 0; a < n; a++ {
			objs <- fluxObject(fmt.Sprintf(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %s, namespace: %s}
spec: {interval: %s, path: ./app%02d, prune: true, targetNamespace: %s, sourceRef: {kind: GitRepository, name: src%02d}}
`, s.syncName(r, a), fluxNS, s.interval, a, s.fluxNamespaces()[r], r))
		}
	}
	close(objs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	total := s.repos * n
	// Ready once each: at a one-minute interval a Kustomization is
	// reconciled again (Ready Unknown while it is) before the last ones
	// are first applied.
	// All Ready at one moment, as bench serve measures Sluice, is looked
	// for until two intervals after each was Ready once.
	wasReady := map[string]bool{}
	var allReady, atOnce time.Duration
	var cpuA, apiCPUA time.Duration
	var apiReqA requestCounts
	most := 0 // the most Ready at one moment
	for {
		if err := ca.List(ctx, list, client.InNamespace(fluxNS)); err != nil {
			return err
		}
		now := 0
		for _, k := range list.Items {
			if fluxReady(k) {
				wasReady[k.GetName()] = true
				now++
			}
		}
		most = max(most, now)
		if allReady == 0 && len(wasReady) == total {
			allReady = time.Since(start)
			cpuA = fluxCPU()
			apiCPUA, _ = procStat(api.pid)
			apiReqA = api.requests(ctx)
		}
		if now == total {
			atOnce = time.Since(start)
			break
		}
		if allReady > 0 && time.Since(start) > allReady+2*s.interval {
			break
		}
		if time.Since(start) > 20*time.Minute {
			return fmt.Errorf("(a): %d of %d Kustomizations Ready after 20 minutes", len(wasReady), total)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// (b) one idle interval, nothing changed.
	time.Sleep(5 * time.Second)
	cpuB0 := fluxCPU()
	apiCPUB0, _ := procStat(api.pid)
	apiReqB0 := api.requests(ctx)
	gitB := s.git.Requests.Load()
	time.Sleep(s.interval)
	cpuB1 := fluxCPU()
	apiCPUB1, _ := procStat(api.pid)
	apiReqB1 := api.requests(ctx)
	gitBn := s.git.Requests.Load() - gitB

	fmt.Printf("On a local kube-apiserver v1.37.2 with the loopback git server: %d Kustomizations (kustomize-controller v1.9.6) over %d GitRepositories (source-controller v1.9.6), each applying a Deployment and a ConfigMap into its repository's namespace, prune on; interval %s; the controllers at their default concurrency, --log-level info, in processes of their own. GOMAXPROCS=%d.\n\n",
		total, s.repos, s.interval, runtime.GOMAXPROCS(0))
	fmt.Println("| measure | Flux |")
	fmt.Println("|---|---:|")
	fmt.Printf("| (a) each Ready once | %s |\n", round(allReady))
	if atOnce > 0 {
		fmt.Printf("| (a) all Ready at one moment (as bench serve measures Sluice) | %s |\n", round(atOnce))
	} else {
		fmt.Printf("| (a) all Ready at one moment (as bench serve measures Sluice) | not within two intervals of the above (at most %d of %d at once) |\n", most, total)
	}
	fmt.Printf("| (a) source- + kustomize-controller CPU (per Kustomization) | %s (%s) |\n", round(cpuA-cpu0), round((cpuA-cpu0)/time.Duration(total)))
	fmt.Printf("| (a) kube-apiserver: CPU (per Kustomization); requests | %s (%s); %s |\n", round(apiCPUA-apiCPU0), round((apiCPUA-apiCPU0)/time.Duration(total)), apiReqA.since(apiReq0, total))
	fmt.Printf("| (b) idle interval: git requests | %d |\n", gitBn)
	fmt.Printf("| (b) source- + kustomize-controller CPU | %s |\n", round(cpuB1-cpuB0))
	fmt.Printf("| (b) kube-apiserver: CPU; requests | %s; %s |\n", round(apiCPUB1-apiCPUB0), apiReqB1.since(apiReqB0, total))
	fmt.Printf("| (e) controllers' peak RSS (source + kustomize) | %d MiB |\n", fluxRSS()/1024)
	return nil
}

// fluxNamespaces are the namespaces the Kustomizations apply into, one
// per source repository (its apps' names repeat across repositories).
func (s *serveBench) fluxNamespaces() []string {
	out := make([]string, s.repos)
	for r := range out {
		out[r] = fmt.Sprintf("apps-%02d", r)
	}
	return out
}

func fluxObject(y string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		panic(err)
	}
	return u
}

// fluxReady: Ready=True for the object's generation, a revision applied.
func fluxReady(k unstructured.Unstructured) bool {
	applied, _, _ := unstructured.NestedString(k.Object, "status", "lastAppliedRevision")
	observed, _, _ := unstructured.NestedInt64(k.Object, "status", "observedGeneration")
	if applied == "" || observed != k.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(k.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}
