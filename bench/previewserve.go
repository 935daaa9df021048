package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/controller"
	"sluice.dev/sluice/internal/devcluster"
	"sluice.dev/sluice/internal/testenv"
)

// mainPreviewServe measures previews from the controller: -syncs apps of
// one source repository on a real Gitea, hydrated by `sluice serve`; a
// pull request touching -touch apps, pushed to -prs times. Each push makes
// Gitea deliver its own signed webhook; the time is from the push's end
// to the comment naming the new head (Gitea's API polled every 50 ms),
// and the controller's own sluice_preview_duration_seconds. The baseline,
// in the same run: `sluice preview` of the same pull request on a warm
// cache, as a CI job runs it.
func mainPreviewServe() {
	syncs := flag.Int("syncs", 100, "apps of the source repository, one ManifestSync each")
	touch := flag.Int("touch", 3, "apps the pull request touches")
	prs := flag.Int("prs", 20, "pushes to the pull request timed")
	history := flag.Int("history", 0, "commits of history before the apps (a monorepo's: -syncs 500 -history 15000)")
	idle := flag.Duration("idle", 30*time.Second, "the controller's idle CPU is measured this long before the pull request and after its last preview")
	flag.Parse()
	tb := newTB()
	defer tb.cleanup()
	if err := runPreviewServe(tb, *syncs, *touch, *prs, *history, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "bench preview-serve:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

func runPreviewServe(tb *benchTB, syncs, touch, prs, history int, idle time.Duration) error {
	ctx := context.Background()
	work := tb.TempDir()
	bin, _, err := tools(work)
	if err != nil {
		return err
	}
	g := testenv.StartGitea(tb)
	srcURL := g.CreateRepo(tb, "mono")
	git := testenv.NewGitServer(tb)
	dstURL := git.CreateRepo(tb, "deploy")
	w := testenv.NewWork(tb, g.PushURL(srcURL))
	if err := addHistory(w.Dir, history); err != nil {
		return err
	}
	cm := func(a, v int) (string, string) {
		return fmt.Sprintf("apps/app%03d/configmap.yaml", a), fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app%03d}\ndata: {v: '%d'}\n", a, v)
	}
	files := map[string]string{}
	for a := 0; a < syncs; a++ {
		k, v := cm(a, 0)
		files[k] = v
		files[fmt.Sprintf("apps/app%03d/kustomization.yaml", a)] = "resources: [configmap.yaml]\n"
	}
	w.Write(files).Commit("apps")
	w.Push("main")
	d := testenv.NewWork(tb, dstURL)
	d.Write(map[string]string{"README.md": "# deploy\n"}).Commit("init")
	d.Push("main")

	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: work, Build: true})
	if err != nil {
		return err
	}
	defer cl.Stop()
	c, err := client.New(cl.Config, client.Options{Scheme: controller.Scheme()})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: serveNS}}); err != nil {
		return err
	}
	const token = "bench-token"
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: serveNS, Labels: map[string]string{controller.ReceiverLabel: "true"}}, StringData: map[string]string{"token": token}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gitea", Namespace: serveNS}, StringData: map[string]string{"username": g.User, "password": g.Password}},
	} {
		if err := c.Create(ctx, s); err != nil {
			return err
		}
	}
	hook, metrics, health := freeAddr(), freeAddr(), freeAddr()
	logf, err := os.Create(filepath.Join(work, "controller.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	ctrl := exec.Command(bin, "serve", "--kubeconfig", cl.Kubeconfig, "--cache-dir", filepath.Join(work, "ctrl-cache"),
		"--hook-addr", hook, "--metrics-addr", metrics, "--health-addr", health, "--allow-remote-hosts", "127.0.0.1", "--log-encoding", "text")
	ctrl.Stdout, ctrl.Stderr = logf, logf
	devcluster.DieWithParent(ctrl)
	if err := ctrl.Start(); err != nil {
		return err
	}
	defer func() { ctrl.Process.Kill(); ctrl.Wait() }()
	if err := waitFor(60*time.Second, func() bool {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}); err != nil {
		return fmt.Errorf("the controller never got ready (see %s)", logf.Name())
	}
	for a := 0; a < syncs; a++ {
		ms := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Namespace: serveNS, Name: fmt.Sprintf("app%03d", a)},
			Spec: v1alpha1.ManifestSyncSpec{
				Source:      v1alpha1.Source{Repo: srcURL, Ref: "main", Path: fmt.Sprintf("apps/app%03d", a), SecretRef: &v1alpha1.SecretRef{Name: "gitea"}},
				Destination: v1alpha1.Destination{Repo: dstURL, Branch: "env/dev", Path: fmt.Sprintf("apps/app%03d", a)},
			}}
		if err := c.Create(ctx, ms); err != nil {
			return err
		}
	}
	if err := waitFor(10*time.Minute, func() bool {
		var list v1alpha1.ManifestSyncList
		if c.List(ctx, &list, client.InNamespace(serveNS)) != nil {
			return false
		}
		n := 0
		for _, ms := range list.Items {
			if meta.IsStatusConditionTrue(ms.Status.Conditions, v1alpha1.ConditionReady) {
				n++
			}
		}
		return n == syncs
	}); err != nil {
		return fmt.Errorf("not every sync got Ready (see %s)", logf.Name())
	}
	g.API(tb, "POST", "repos/"+g.User+"/mono/hooks", map[string]any{
		"type": "gitea", "active": true, "events": []string{"pull_request", "pull_request_sync"},
		"config": map[string]string{"url": "http://" + hook + "/hook/" + serveNS + "/hooks", "content_type": "json", "secret": token},
	}, nil)

	// The controller's idle CPU, before any pull request.
	pid := ctrl.Process.Pid
	idleCPU := func() time.Duration {
		c0, _ := procStat(pid) // its render workers' included
		time.Sleep(idle)
		c1, _ := procStat(pid)
		return c1 - c0
	}
	idleBefore := idleCPU()

	// The pull request, opened on its first commit.
	testenv.Git(tb, w.Dir, "checkout", "-q", "-b", "change")
	push := func(i int) string {
		files := map[string]string{}
		for k := 0; k < touch; k++ {
			key, v := cm(k, i+1) // the same apps, new values: the pull request keeps touching them
			files[key] = v
		}
		head := w.Write(files).Commit(fmt.Sprintf("change %d", i))
		w.Push("change")
		return head
	}
	comment := func(number int) string {
		var cs []struct {
			Body string `json:"body"`
		}
		if err := g.APIAs(g.User, g.Password, http.MethodGet, fmt.Sprintf("repos/%s/mono/issues/%d/comments", g.User, number), nil, &cs); err != nil || len(cs) == 0 {
			return ""
		}
		return cs[len(cs)-1].Body
	}
	head := push(0)
	number := g.OpenPullRequest(tb, g.User, g.Password, "mono", "change", "main", "change")
	if err := waitFor(2*time.Minute, func() bool { return strings.Contains(comment(number), "`"+head[:7]+"`") }); err != nil {
		return fmt.Errorf("no preview of the opened pull request (see %s)", logf.Name())
	}
	sum0, count0 := metricAt(metrics, "sluice_preview_duration_seconds_sum"), metricAt(metrics, "sluice_preview_duration_seconds_count")
	var lat, delivery, toComment []time.Duration
	for i := 1; i <= prs; i++ {
		head := push(i)
		start := time.Now()
		if err := waitFor(time.Minute, func() bool { return strings.Contains(comment(number), "`"+head[:7]+"`") }); err != nil {
			return fmt.Errorf("push %d: no comment naming %s within a minute (see %s)", i, head[:7], logf.Name())
		}
		done := time.Since(start)
		lat = append(lat, done)
		if at, ok := webhookAfter(logf.Name(), start); ok {
			delivery, toComment = append(delivery, at.Sub(start)), append(toComment, done-at.Sub(start))
		}
		body := comment(number)
		if want := fmt.Sprintf("%d folders change", touch); !strings.Contains(body, want) {
			return fmt.Errorf("push %d: the comment does not say %q:\n%s", i, want, body)
		}
	}
	sum, count := metricAt(metrics, "sluice_preview_duration_seconds_sum")-sum0, metricAt(metrics, "sluice_preview_duration_seconds_count")-count0
	idleAfter := idleCPU()

	// The baseline: the CI route, `sluice preview` of the same pull
	// request on a warm cache.
	syncDir := filepath.Join(work, "syncs")
	os.MkdirAll(syncDir, 0o755)
	var b strings.Builder
	for a := 0; a < syncs; a++ {
		fmt.Fprintf(&b, "---\napiVersion: sluice.dev/v1alpha1\nkind: ManifestSync\nmetadata: {name: app%03d}\nspec:\n  source: {repo: %s, ref: main, path: apps/app%03d}\n  destination: {repo: %s, branch: env/dev, path: apps/app%03d}\n", a, g.PushURL(srcURL), a, dstURL, a)
	}
	os.WriteFile(filepath.Join(syncDir, "syncs.yaml"), []byte(b.String()), 0o644)
	cache := filepath.Join(work, "cli-cache")
	var cli []time.Duration
	for i := 0; i < 1+5; i++ {
		m, out, err := timed("sluice preview", bin, "preview", "-f", syncDir, "--cache-dir", cache, "--base", "main", "--head", fmt.Sprintf("refs/pull/%d/head", number), "-o", "json")
		if err != nil && !strings.Contains(err.Error(), "exit status 1") {
			return fmt.Errorf("sluice preview: %w\n%s", err, tail(out))
		}
		if i > 0 { // the first warms the cache
			cli = append(cli, m.wall)
		}
	}

	if len(toComment) == 0 {
		return fmt.Errorf("the controller's log names no webhook (see %s)", logf.Name())
	}
	fmt.Printf("%d syncs of one Gitea repository (%d commits of history) under `sluice serve`; a pull request touching %d of them, pushed to %d times.\n\n", syncs, history, touch, prs)
	fmt.Printf("| | p50 | p95 | target |\n|---|---:|---:|---|\n")
	fmt.Printf("| webhook received to the comment naming the new head read back from Gitea, %d of %d | %s | %s | p50 < 2 s, p95 < 5 s |\n", len(toComment), prs, percentile(toComment, 50), percentile(toComment, 95))
	fmt.Printf("| (Gitea: push to its webhook delivered) | %s | %s | |\n", percentile(delivery, 50), percentile(delivery, 95))
	fmt.Printf("| push to the comment, end to end | %s | %s | |\n", percentile(lat, 50), percentile(lat, 95))
	if count > 0 {
		fmt.Printf("| the controller's sluice_preview_duration_seconds (webhook to comment posted), mean of %.0f | %s | | |\n", count, round(time.Duration(sum/count*float64(time.Second))))
	}
	fmt.Printf("| baseline: `sluice preview` of the same pull request, warm cache (the CI route), 5 runs | %s | %s | |\n", percentile(cli, 50), percentile(cli, 95))
	fmt.Printf("\nThe controller's idle CPU over %s (its render workers included): %s before the pull request, %s after its last preview (%.2fx).\n",
		idle, round(idleBefore), round(idleAfter), float64(idleAfter)/float64(max(idleBefore, time.Millisecond)))
	return nil
}

func waitFor(d time.Duration, f func() bool) error {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if f() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
	}
}

// webhookAfter is when the controller's log says a webhook triggered
// something, first after t.
func webhookAfter(log string, t time.Time) (time.Time, bool) {
	data, err := os.ReadFile(log)
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "msg=webhook ") || strings.Contains(line, "triggered=0") || !strings.HasPrefix(line, "time=") {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err == nil && at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}
