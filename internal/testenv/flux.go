package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fluxControllers are the Flux controllers hack/flux/build.sh builds, in
// the order they start (the source first: the others read its artifacts).
var fluxControllers = []string{"source-controller", "kustomize-controller", "helm-controller"}

// FluxBinary returns the path of a real Flux controller that `make tools`
// builds (hack/flux/build.sh, at the version its wrapper module requires).
func FluxBinary(t TB, name string) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	version, err := requiredVersion(filepath.Join(root, "hack", "flux", name, "go.mod"), "github.com/fluxcd/"+name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(root, "bin", "flux", name+"-"+version, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s %s is not built: run `make tools` (or hack/flux/build.sh) first; `make test` does", name, version)
	}
	return p
}

// Flux is the real Flux controllers (source-controller,
// kustomize-controller, helm-controller) running out of cluster against a
// control plane, as processes of their own, watching one namespace: the
// test's, where its GitRepositories, Kustomizations and HelmReleases are.
// Objects they apply may go to any namespace.
type Flux struct {
	// Namespace is the namespace the controllers watch.
	Namespace string
	logs      map[string]string
}

// StartFlux starts the controllers; they stop when the test ends.
func StartFlux(t TB, kubeconfig, namespace string) *Flux {
	t.Helper()
	return StartFluxLogging(t, kubeconfig, namespace, "debug")
}

// StartFluxLogging is StartFlux with the controllers' --log-level (a
// benchmark's "info": debug logs cost a controller CPU of their own).
func StartFluxLogging(t TB, kubeconfig, namespace, level string) *Flux {
	t.Helper()
	f := &Flux{Namespace: namespace, logs: map[string]string{}}
	dir := t.TempDir()
	storage := freeAddr(t)
	if err := os.MkdirAll(filepath.Join(dir, "storage"), 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	for _, name := range fluxControllers {
		bin := FluxBinary(t, name)
		health := freeAddr(t)
		args := []string{
			"--enable-leader-election=false",
			"--watch-all-namespaces=false",
			"--metrics-addr=" + freeAddr(t),
			"--health-addr=" + health,
			"--log-level=" + level,
			"--log-encoding=console",
			"--requeue-dependency=1s",
		}
		if name == "source-controller" {
			args = append(args, "--storage-path="+filepath.Join(dir, "storage"), "--storage-addr="+storage, "--storage-adv-addr="+storage)
		}
		logPath := filepath.Join(dir, name+".log")
		log, err := os.Create(logPath)
		if err != nil {
			t.Fatalf("%v", err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+namespace)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		f.logs[name] = logPath
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			log.Close()
		})
		if err := waitHealthy("http://"+health+"/readyz", 60*time.Second, done); err != nil {
			t.Fatalf("%s did not become ready: %v\n%s", name, err, f.Log(name, 60))
		}
	}
	return f
}

// Log returns the last lines of a controller's log.
func (f *Flux) Log(name string, lines int) string {
	file, err := os.Open(f.logs[name])
	if err != nil {
		return err.Error()
	}
	defer file.Close()
	var all []string
	s := bufio.NewScanner(file)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		all = append(all, s.Text())
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Logs returns the last lines of every controller's log, for a failing
// test to show.
func (f *Flux) Logs(lines int) string {
	var b strings.Builder
	for _, name := range fluxControllers {
		fmt.Fprintf(&b, "--- %s:\n%s\n", name, f.Log(name, lines))
	}
	return b.String()
}

func freeAddr(t TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHealthy(url string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("the process exited")
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitApplied waits until the Kustomization name, in the controllers'
// namespace, has applied revision ("main@sha1:…") and is Ready, and
// returns it; past a minute it fails the test with its conditions and
// the controllers' logs.
func (f *Flux) WaitApplied(t TB, c client.Client, name, revision string) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
		u.SetKind("Kustomization")
		err := c.Get(context.Background(), client.ObjectKey{Namespace: f.Namespace, Name: name}, u)
		got, _, _ := unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		ready := false
		for _, cond := range conds {
			if m, _ := cond.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				ready = true
			}
		}
		if err == nil && got == revision && ready {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kustomization %s/%s has not applied %s (applied %q, %v): %v\n%s", f.Namespace, name, revision, got, err, conds, f.Logs(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
