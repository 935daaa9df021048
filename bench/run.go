package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"sluice.dev/sluice/internal/devcluster"
)

func mainRun() {
	n := flag.Int("n", 50, "edits per tool")
	flag.Parse()
	tb := newTB()
	defer tb.cleanup()
	if err := runRun(tb, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		tb.cleanup()
		os.Exit(1)
	}
}

// kustomization20 writes a 20-object kustomization: 6 Deployments, 6
// Services, 8 ConfigMaps (config-0 is the one edited).
func kustomization20(dir, ns string) {
	os.MkdirAll(dir, 0o755)
	var res []string
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("app-%d.yaml", i)
		os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: app-%[1]d}
spec:
  selector: {matchLabels: {app: app-%[1]d}}
  template:
    metadata: {labels: {app: app-%[1]d}}
    spec: {containers: [{name: app, image: "registry.example.com/app-%[1]d:1.0", ports: [{containerPort: 8080}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: app-%[1]d}
spec: {selector: {app: app-%[1]d}, ports: [{port: 80, targetPort: 8080}]}
`, i)), 0o644)
		res = append(res, name)
	}
	for i := 0; i < 8; i++ {
		name := fmt.Sprintf("config-%d.yaml", i)
		writeConfig(dir, i, 0)
		res = append(res, name)
	}
	os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("namespace: "+ns+"\nresources: ["+strings.Join(res, ", ")+"]\n"), 0o644)
}

func writeConfig(dir string, i, value int) {
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("config-%d.yaml", i)), []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config-%d}\ndata: {value: \"%d\"}\n", i, value)), 0o644)
}

// ackTimer times, from a file write, the API server's acknowledgement of
// the change: the watch event that carries the new value.
type ackTimer struct {
	w  watch.Interface
	ns string
}

func newAckTimer(cs *kubernetes.Clientset, ns string) (*ackTimer, error) {
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=config-0"})
	if err != nil {
		return nil, err
	}
	return &ackTimer{w: w, ns: ns}, nil
}

func (a *ackTimer) until(value string, t0 time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := time.After(timeout)
	for {
		select {
		case ev := <-a.w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Data["value"] == value {
				return time.Since(t0), nil
			}
		case <-deadline:
			return 0, fmt.Errorf("config-0=%s not seen within %s", value, timeout)
		}
	}
}

func runRun(tb *benchTB, n int) error {
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
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	kc := "--kubeconfig=" + c.Kubeconfig
	for _, ns := range []string{"bench-run", "bench-gitops", "bench-kubectl"} {
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	// sluice run: one session, n saves.
	runLat, err := sessionLatency(cs, bin, kc, filepath.Join(work, "run", "deploy"), "bench-run", n, nil)
	if err != nil {
		return err
	}
	// The same over objects a GitOps tool already applied (here kubectl's
	// server-side apply, as an applier): the session leaves the other 19
	// to it and takes over only the edited ConfigMap.
	gDir := filepath.Join(work, "gitops", "deploy")
	owned, err := sessionLatency(cs, bin, kc, gDir, "bench-gitops", n, func() error {
		if out, err := exec.Command(kubectl, "apply", "--server-side", "--field-manager", "gitops", "-k", gDir, kc).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl: %w\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		return err
	}

	// kubectl apply --server-side -k after each save.
	kDir := filepath.Join(work, "kubectl")
	kustomization20(kDir, "bench-kubectl")
	if out, err := exec.Command(kubectl, "apply", "--server-side", "-k", kDir, kc).CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl: %w\n%s", err, out)
	}
	kack, err := newAckTimer(cs, "bench-kubectl")
	if err != nil {
		return err
	}
	var kLat []time.Duration
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		writeConfig(kDir, 0, i)
		if out, err := exec.Command(kubectl, "apply", "--server-side", "-k", kDir, kc).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl, edit %d: %w\n%s", i, err, out)
		}
		d, err := kack.until(fmt.Sprint(i), t0, 10*time.Second)
		if err != nil {
			return fmt.Errorf("kubectl, edit %d: %w", i, err)
		}
		kLat = append(kLat, d)
	}
	rp50, rp95 := percentile(runLat, 50), percentile(runLat, 95)
	kp50, kp95 := percentile(kLat, 50), percentile(kLat, 95)
	fmt.Printf("A 20-object kustomization (6 Deployments, 6 Services, 8 ConfigMaps) on a local kube-apiserver v1.37.2; %d saves of one ConfigMap each. Latency: from the file write to the API server's watch event carrying the new value.\n\n", n)
	fmt.Println("| | p50 | p95 | max |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| sluice run (one session) | %s | %s | %s |\n", rp50, rp95, percentile(runLat, 100))
	fmt.Printf("| sluice run over objects another applier deployed (only the edited one taken over) | %s | %s | %s |\n", percentile(owned, 50), percentile(owned, 95), percentile(owned, 100))
	fmt.Printf("| kubectl apply --server-side -k per save | %s | %s | %s |\n", kp50, kp95, percentile(kLat, 100))
	fmt.Printf("| kubectl / sluice | %.1fx | %.1fx | |\n", float64(kp50)/float64(rp50), float64(kp95)/float64(rp95))
	fmt.Printf("\nTargets: p50 under 250 ms (%s), p95 under 500 ms (%s), at least 3x faster than the kubectl loop (p50 %.1fx).\n", rp50, rp95, float64(kp50)/float64(rp50))
	return nil
}

// sessionLatency runs one `sluice run` session on a 20-object
// kustomization in ns (deployed first by deploy, if given) and times n
// saves of one ConfigMap, from the write to the API server's event.
func sessionLatency(cs *kubernetes.Clientset, bin, kc, dir, ns string, n int, deploy func() error) ([]time.Duration, error) {
	kustomization20(dir, ns)
	if deploy != nil {
		if err := deploy(); err != nil {
			return nil, err
		}
	}
	ack, err := newAckTimer(cs, ns)
	if err != nil {
		return nil, err
	}
	session := exec.Command(bin, "run", dir, kc, "--session", ns, "--ready-timeout", "-1s")
	out, err := session.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := session.Start(); err != nil {
		return nil, err
	}
	defer session.Process.Kill()
	// The first iteration's line: the session is up and has applied (or,
	// over deployed objects, left alone) the whole set.
	first := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := false
		for sc.Scan() {
			if !once && strings.HasPrefix(sc.Text(), "#1 ") {
				once = true
				close(first)
			}
		}
	}()
	select {
	case <-first:
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("the session in %s did not report its first iteration within 60s", ns)
	}
	if _, err := ack.until("0", time.Now(), 30*time.Second); err != nil {
		return nil, fmt.Errorf("the session's first apply: %w", err)
	}
	var lat []time.Duration
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		writeConfig(dir, 0, i)
		d, err := ack.until(fmt.Sprint(i), t0, 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("sluice run in %s, edit %d: %w", ns, i, err)
		}
		lat = append(lat, d)
		time.Sleep(150 * time.Millisecond) // a developer does not save every instant
	}
	session.Process.Signal(os.Interrupt)
	session.Wait()
	return lat, nil
}

// percentile is the p-th percentile of ds, 0 when there are none.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i].Round(time.Millisecond)
}
