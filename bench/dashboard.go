package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	goruntime "runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/dashboard"
	"sluice.dev/sluice/internal/devcluster"
)

// mainDashboard measures the syncs page at 1,000 ManifestSyncs (with
// statuses, as the controller writes them) on the real API server: the
// server's answer, and the page loaded in headless Chromium, against
// kubectl get manifestsyncs -A in the same run.
func mainDashboard() {
	n := flag.Int("syncs", 1000, "ManifestSyncs")
	runs := flag.Int("runs", 30, "measurements of each")
	flag.Parse()
	if err := benchDashboard(*n, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench dashboard:", err)
		os.Exit(1)
	}
}

func benchDashboard(n, runs int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work, err := os.MkdirTemp("", "sluice-bench-dashboard-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: work, Build: true})
	if err != nil {
		return err
	}
	defer cl.Stop()
	cl.Config.QPS, cl.Config.Burst = 500, 1000
	scheme := runtime.NewScheme()
	clientgoscheme.AddToScheme(scheme)
	v1alpha1.AddToScheme(scheme)
	c, err := client.New(cl.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	namespaces := []string{"team-a", "team-b", "team-c", "team-d"}
	for _, ns := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- createSync(ctx, c, namespaces[i%len(namespaces)], i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	fmt.Printf("%d ManifestSyncs with statuses created in %s\n", n, time.Since(start).Round(time.Millisecond))

	srv, err := dashboard.New(ctx, cl.Config, dashboard.Options{})
	if err != nil {
		return err
	}
	addr, _, err := srv.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	base := "http://" + addr

	get := func(path string) func() error { return getAs(base, path, "", fmt.Sprintf("of %d syncs", n)) }
	kubectl := func() error {
		out, err := exec.Command("kubectl", "--kubeconfig", cl.Kubeconfig, "get", "manifestsyncs", "-A").CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl: %v\n%s", err, out)
		}
		return nil
	}
	type result struct {
		name     string
		p50, p95 time.Duration
	}
	var results []result
	measure := func(name string, f func() error) error {
		f() // warm
		var ds []time.Duration
		for range runs {
			t := time.Now()
			if err := f(); err != nil {
				return err
			}
			ds = append(ds, time.Since(t))
		}
		slices.Sort(ds)
		results = append(results, result{name, ds[len(ds)/2], ds[len(ds)*95/100]})
		return nil
	}
	if err := measure("(b) kubectl get manifestsyncs -A (baseline)", kubectl); err != nil {
		return err
	}
	if err := measure("(a) GET /syncs: the first page of 50", get("/syncs")); err != nil {
		return err
	}
	if err := measure("(a') GET /syncs?state=Failed: filtered on the server", get("/syncs?state=Failed")); err != nil {
		return err
	}
	if err := measure("(a'') GET /syncs?page=20: the last page", get("/syncs?page=20")); err != nil {
		return err
	}

	// A controller's dashboard: a ServiceAccount's token reviewed by the
	// API server, its rights asked per namespace (it may list syncs in two
	// of the four), the answers kept 10 seconds.
	token, err := viewerToken(ctx, c, cl, namespaces[:2])
	if err != nil {
		return err
	}
	asController, err := dashboard.New(ctx, cl.Config, dashboard.Options{Auth: &dashboard.Auth{}})
	if err != nil {
		return err
	}
	caddr, _, err := asController.Listen(ctx, "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := measure("(a''') GET /syncs as a ServiceAccount allowed 2 of 4 namespaces, through a controller's dashboard", getAs("http://"+caddr, "/syncs", token, fmt.Sprintf("of %d syncs", n/2))); err != nil {
		return err
	}

	// The page in a browser, from navigation to its load event.
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return fmt.Errorf("no chromium: apt-get install chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(work+"/chromium"))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	var loads []time.Duration
	for i := range runs + 1 {
		if err := chromedp.Do(bctx, chromedp.Navigate(base+"/syncs"), chromedp.WaitVisible("table.syncs tbody tr")); err != nil {
			return err
		}
		ms, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`(() => { const e = performance.getEntriesByType("navigation")[0]; return e.loadEventEnd - e.startTime; })()`))
		if err != nil {
			return err
		}
		if i > 0 { // the first load starts the browser's caches
			loads = append(loads, time.Duration(ms*float64(time.Millisecond)))
		}
	}
	slices.Sort(loads)
	results = append(results, result{"(c) the syncs page in Chromium: navigation to load event", loads[len(loads)/2], loads[len(loads)*95/100]})

	fmt.Printf("\n%d ManifestSyncs in %d namespaces, %d runs each. GOMAXPROCS=%d.\n\n", n, len(namespaces), runs, goruntime.GOMAXPROCS(0))
	fmt.Println("| measurement | p50 | p95 | p50 vs (b) |")
	fmt.Println("|---|---:|---:|---:|")
	baseline := results[0].p50
	for _, r := range results {
		fmt.Printf("| %s | %s | %s | %.2fx |\n", r.name, r.p50.Round(100*time.Microsecond), r.p95.Round(100*time.Microsecond), float64(baseline)/float64(r.p50))
	}
	worst := max(results[len(results)-1].p95, results[1].p95)
	fmt.Printf("\nTarget: the syncs page loads in under 300 ms at %d syncs: p95 %s (server) and %s (browser load).\n", n, results[1].p95.Round(time.Millisecond), results[len(results)-1].p95.Round(time.Millisecond))
	if worst >= 300*time.Millisecond {
		fmt.Println("MISSED")
	}
	return nil
}

// getAs gets a page, with a bearer token when given, and checks it says
// want.
func getAs(base, path, token, want string) func() error {
	return func() error {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			return fmt.Errorf("GET %s: %s (want %q)", path, resp.Status, want)
		}
		return nil
	}
}

// viewerToken makes a ServiceAccount that may list syncs in namespaces,
// and returns a token of it.
func viewerToken(ctx context.Context, c client.Client, cl *devcluster.Cluster, namespaces []string) (string, error) {
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[0], Name: "viewer"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "sync-viewer"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"sluice.dev"}, Resources: []string{"manifestsyncs"}, Verbs: []string{"get", "list", "watch"}}}},
	}
	for _, ns := range namespaces {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "sync-viewer"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespaces[0], Name: "viewer"}}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return "", err
		}
	}
	exp := int64(3600)
	tr, err := kubernetes.NewForConfigOrDie(cl.Config).CoreV1().ServiceAccounts(namespaces[0]).CreateToken(ctx, "viewer",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

func createSync(ctx context.Context, c client.Client, ns string, i int) error {
	name := fmt.Sprintf("app-%04d", i)
	ms := &v1alpha1.ManifestSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": ns}},
		Spec: v1alpha1.ManifestSyncSpec{
			Source:      v1alpha1.Source{Repo: "https://git.example.com/apps/" + name + ".git", Path: "deploy/prod"},
			Destination: v1alpha1.Destination{Repo: "https://git.example.com/fleet/deploy.git", Branch: "env/prod", Path: "apps/" + name},
		},
	}
	if err := c.Create(ctx, ms); err != nil {
		return err
	}
	commit := fmt.Sprintf("%040x", i+1)
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded, Message: "committed " + commit[:12] + " to env/prod", LastTransitionTime: metav1.Now()}
	if i%97 == 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonFailed, "render failed"
	}
	ms.Status = v1alpha1.ManifestSyncStatus{
		ReconcileStatus: v1alpha1.ReconcileStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{cond}},
		Source:          &v1alpha1.ProvenanceSource{Repo: ms.Spec.Source.Repo, Commit: commit, Path: "deploy/prod"},
		Destination:     &v1alpha1.DestinationStatus{Repo: ms.Spec.Destination.Repo, Branch: "env/prod", Path: ms.Spec.Destination.Path, Commit: strings.Repeat("d", 40)},
		Images: []v1alpha1.PinnedImage{
			{Name: "app", From: "registry.example.com/" + name, Tag: "1.0.0", Digest: "sha256:" + strings.Repeat("ab", 32)},
			{Name: "sidecar", From: "registry.example.com/proxy", Tag: "2.3", Digest: "sha256:" + strings.Repeat("cd", 32)},
		},
	}
	return c.Status().Update(ctx, ms)
}
