package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sluice.dev/sluice/internal/devcluster"
)

// ApplicationSetController returns the path of Argo CD's ApplicationSet
// controller that `make tools` builds (hack/argocd/build.sh).
func ApplicationSetController(t TB) string {
	t.Helper()
	return argoTool(t, "applicationset-controller")
}

func argoTool(t TB, name string) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "argocd", "build.sh"), "--check", name).CombinedOutput()
	if err != nil {
		t.Fatalf("%s", strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out))
}

// ArgoManifests returns what Argo CD's repo-server generates for the
// Application app (YAML) from the checkout root (its own
// GenerateManifests, built by `make tools` as argocd-manifests, running
// the reference kustomize and helm binaries): what Argo CD would apply,
// as YAML documents. args are argocd-manifests' flags (-tracking,
// -source). root is left as it is.
func ArgoManifests(t TB, app, root string, args ...string) string {
	t.Helper()
	bin := argoTool(t, "argocd-manifests")
	// Argo CD edits a kustomization where it renders it: a copy, as its
	// repo-server's own checkout.
	checkout := filepath.Join(t.TempDir(), "checkout")
	if err := os.CopyFS(checkout, os.DirFS(root)); err != nil {
		t.Fatalf("copying %s: %v", root, err)
	}
	root = checkout
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(app), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	cmd := exec.Command(bin, append([]string{"-app", f, "-root", root}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(KustomizeBinary(t))+string(os.PathListSeparator)+filepath.Dir(HelmBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Argo CD's manifest generation: %v: %s", err, stderr.String())
	}
	return string(out)
}

// ArgoManifestsOCI is ArgoManifests for an Application whose source is
// an oci:// artifact: Argo CD's own OCI client resolves, pulls and
// extracts it from its registry (over plain HTTP: the test's registry)
// with the repo-server's default allowed layer media types. It returns
// the manifests, or the error Argo CD gives.
func ArgoManifestsOCI(t TB, app string, args ...string) (string, error) {
	t.Helper()
	bin := argoTool(t, "argocd-manifests")
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(app), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	cmd := exec.Command(bin, append([]string{"-app", f, "-oci-plain-http"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "PATH="+filepath.Dir(KustomizeBinary(t))+string(os.PathListSeparator)+filepath.Dir(HelmBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// StartApplicationSetController runs Argo CD's real ApplicationSet
// controller out of cluster against a control plane, for the
// ApplicationSets of one namespace, with the settings it reads there
// (argocd-cm, argocd-secret, the default AppProject) created first. It
// stops when the test ends; logs returns its log.
func StartApplicationSetController(t TB, kubeconfig, namespace string, create func(yaml string)) (logs func() string) {
	t.Helper()
	bin := ApplicationSetController(t)
	create(argoSettings(namespace, ""))
	dir := t.TempDir()
	logPath := filepath.Join(dir, "applicationset-controller.log")
	logs = func() string {
		data, _ := os.ReadFile(logPath)
		return string(data)
	}
	// Its manager reads the kubeconfig from the environment, its settings
	// informers from the flag. It registers no health checks: it is ready
	// when its workers start.
	err := launch(t, logPath, dir, append(os.Environ(), "KUBECONFIG="+kubeconfig), func() ([]string, []string) {
		return []string{bin, "--kubeconfig", kubeconfig, "--namespace", namespace,
			"--metrics-addr", freeAddr(t), "--probe-addr", freeAddr(t), "--webhook-addr", freeAddr(t),
			"--argocd-repo-server", freeAddr(t), // no generator here asks it
			"--logformat", "text", "--loglevel", "debug"}, nil
	}, "Starting workers")
	if err != nil {
		t.Fatalf("the ApplicationSet controller did not start its workers: %v\n%s", err, logs())
	}
	return logs
}

// argoSettings is what Argo CD's controllers read in their namespace:
// argocd-cm (with installationID, if not ""), argocd-secret and the
// default AppProject (which Argo CD's API server would create), allowing
// every source, destination and kind.
func argoSettings(namespace, installationID string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: ` + namespace + `, labels: {app.kubernetes.io/part-of: argocd}}
data: {installationID: '` + installationID + `'}
---
apiVersion: v1
kind: Secret
metadata: {name: argocd-secret, namespace: ` + namespace + `, labels: {app.kubernetes.io/part-of: argocd}}
stringData: {server.secretkey: sluice-test-key}
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: ` + namespace + `}
spec:
  sourceRepos: ['*']
  destinations: [{server: '*', namespace: '*'}]
  clusterResourceWhitelist: [{group: '*', kind: '*'}]
`
}

// ArgoCD is Argo CD's real application controller and repo-server, with
// a Redis of their own (Debian's redis-server), running out of cluster
// against a control plane for the Applications of one namespace, as
// Argo CD runs them in it: the controller syncs, self-heals and prunes
// what the repo-server renders from git. Built by `make tools`
// (hack/argocd/build.sh argocd); a test never builds them.
type ArgoCD struct {
	// Namespace is where its Applications and settings are.
	Namespace string
	dir       string
}

// StartArgoCD starts Redis, the repo-server and the application
// controller, the settings they read created first by create (applied as
// a person would). resync is the controller's --app-resync: how often it
// compares every Application with git unasked. They stop when the test
// ends.
func StartArgoCD(t TB, kubeconfig, namespace string, resync time.Duration, create func(yaml string)) *ArgoCD {
	t.Helper()
	bin := argoTool(t, "argocd")
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("Debian's redis-server is not installed (Argo CD's cache): run `make tools` (hack/redis/install.sh)")
	}
	// Each test's Argo CD is an installation of its own (its namespace its
	// installationID), as Argo CD has several share a cluster: it owns
	// only what it applied, though every test names its Application web.
	create(argoSettings(namespace, namespace))
	a := &ArgoCD{Namespace: namespace, dir: t.TempDir()}
	tmp := filepath.Join(a.dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	path := filepath.Dir(KustomizeBinary(t)) + string(os.PathListSeparator) + filepath.Dir(HelmBinary(t)) + string(os.PathListSeparator) + os.Getenv("PATH")
	env := append(os.Environ(), "PATH="+path, "TMPDIR="+tmp, "HOME="+a.dir,
		// No GnuPG keyring to verify commits with (none is asked for).
		"ARGOCD_GPG_ENABLED=false",
		// The in-cluster destination, https://kubernetes.default.svc, is
		// the control plane of KUBECONFIG.
		"ARGOCD_FAKE_IN_CLUSTER=true", "KUBECONFIG="+kubeconfig)
	port := func(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
	var redisAddr, repoAddr string
	a.start(t, "redis", env, func() ([]string, []string) {
		redisAddr = freeAddr(t)
		return []string{redis, "--bind", "127.0.0.1", "--port", port(redisAddr), "--save", "", "--appendonly", "no", "--dir", a.dir}, nil
	}, "Ready to accept connections")
	a.start(t, "repo-server", env, func() ([]string, []string) {
		repoAddr = freeAddr(t)
		metrics := freeAddr(t)
		return []string{bin, "repo-server", "--address", "127.0.0.1", "--port", port(repoAddr),
				"--metrics-address", "127.0.0.1", "--metrics-port", port(metrics), "--disable-tls",
				"--redis", redisAddr, "--logformat", "text", "--loglevel", "debug"},
			[]string{"http://" + metrics + "/metrics"}
	}, "")
	waitListening(t, repoAddr, "the repo-server", a.Logs)
	a.start(t, "application-controller", env, func() ([]string, []string) {
		metrics := freeAddr(t)
		return []string{bin, "application-controller",
				"--kubeconfig", kubeconfig, "--namespace", namespace,
				"--repo-server", repoAddr, "--repo-server-plaintext", "--redis", redisAddr,
				"--metrics-port", port(metrics), "--app-resync", fmt.Sprint(int(resync.Seconds())),
				"--logformat", "text", "--loglevel", "debug"},
			[]string{"http://" + metrics + "/metrics"}
	}, "")
	return a
}

// start starts one part of Argo CD (launch), its log NAME.log.
func (a *ArgoCD) start(t TB, name string, env []string, args func() (cmdline, urls []string), ready string) {
	t.Helper()
	if err := launch(t, filepath.Join(a.dir, name+".log"), a.dir, env, args, ready); err != nil {
		t.Fatalf("Argo CD's %s did not start: %v\n%s", name, err, a.Logs(30))
	}
}

// launch starts a server with the command line args gives (run in dir,
// its output to logPath), and waits until it is ready: its log says ready
// (if not ""), and each of the URLs args gives answers 200; it is stopped
// when the test ends. A free port picked may be taken by another process
// before the server binds it (tests run side by side): one that exits
// before it is ready is started again with what args gives anew, three
// times at most; then the last error is returned.
func launch(t TB, logPath, dir string, env []string, args func() (cmdline, urls []string), ready string) error {
	t.Helper()
	for try := 1; ; try++ {
		cmdline, urls := args()
		log, err := os.Create(logPath)
		if err != nil {
			return err
		}
		cmd := exec.Command(cmdline[0], cmdline[1:]...)
		cmd.Env, cmd.Dir = env, dir
		cmd.Stdout, cmd.Stderr = log, log
		done, stop, err := startProcess(cmd, log)
		if err != nil {
			return err
		}
		err = waitReady(logPath, ready, urls, done)
		if err == nil {
			t.Cleanup(stop)
			return nil
		}
		stop()
		if try == 3 {
			return err
		}
	}
}

// waitReady waits a minute at most for a process's log to hold ready and
// each of urls to answer 200, failing as soon as it exits.
func waitReady(logPath, ready string, urls []string, exited <-chan struct{}) error {
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			return fmt.Errorf("it exited")
		default:
		}
		ok := true
		if ready != "" {
			data, _ := os.ReadFile(logPath)
			ok = strings.Contains(string(data), ready)
		}
		for _, u := range urls {
			if !ok {
				break
			}
			resp, err := http.Get(u)
			ok = err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Logs returns the last n lines of each part's log.
func (a *ArgoCD) Logs(n int) string {
	var b strings.Builder
	for _, name := range []string{"application-controller", "repo-server", "redis"} {
		data, err := os.ReadFile(filepath.Join(a.dir, name+".log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, strings.Join(lines, "\n"))
	}
	return b.String()
}

// waitListening waits until addr accepts connections, a minute at most.
func waitListening(t TB, addr, what string, logs func(int) string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %v\n%s", what, addr, err, logs(30))
		}
	}
}

// startProcess starts cmd, its output going to log (closed once it
// exits). done is closed when it has exited; stop interrupts it, kills it
// 10 s later, and returns once it has exited.
func startProcess(cmd *exec.Cmd, log *os.File) (done chan struct{}, stop func(), err error) {
	devcluster.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, nil, err
	}
	done = make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	return done, func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}, nil
}
