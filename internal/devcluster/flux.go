package devcluster

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
)

// FluxControllers are the Flux controllers hack/flux/build.sh builds, in
// the order they start (the source first: the others read its artifacts).
var FluxControllers = []string{"source-controller", "kustomize-controller", "helm-controller"}

// FluxOptions say how to run the Flux controllers.
type FluxOptions struct {
	// Kubeconfig reaches the API server.
	Kubeconfig string
	// Dir receives their logs and source-controller's artifacts.
	Dir string
	// Namespace is their runtime namespace (flux-system in a cluster
	// Flux bootstrapped).
	Namespace string
	// WatchAll makes them watch every namespace; otherwise Namespace
	// alone.
	WatchAll bool
	// LogLevel is their --log-level; empty is info.
	LogLevel string
	// Build builds missing controllers (about 3 minutes each); otherwise
	// their absence is an error saying how to build them.
	Build bool
}

// Flux is the real Flux source-, kustomize- and helm-controller, running
// out of cluster against a control plane, as processes of their own.
type Flux struct {
	procs []*exec.Cmd
	done  []chan struct{}
	logs  map[string]string
}

// FluxEnv names a directory holding the Flux controllers as
// hack/flux/build.sh lays them out (bin/flux of a source tree:
// NAME-VERSION/NAME), to use instead of building them.
const FluxEnv = "SLUICE_FLUX_DIR"

// FluxBinaries returns the path of each Flux controller `make tools`
// builds (hack/flux/build.sh of the Sluice source tree holding the working
// directory, at the version its wrapper module requires), building the
// missing ones when build is set; or, with $SLUICE_FLUX_DIR, the ones
// there.
func FluxBinaries(ctx context.Context, build bool) (map[string]string, error) {
	if d := os.Getenv(FluxEnv); d != "" {
		bins := map[string]string{}
		for _, name := range FluxControllers {
			found, _ := filepath.Glob(filepath.Join(d, name+"-v*", name))
			if len(found) != 1 {
				return nil, fmt.Errorf("$%s=%s: want one %s-VERSION/%s, found %d", FluxEnv, d, name, name, len(found))
			}
			bins[name] = found[0]
		}
		return bins, nil
	}
	root, err := sourceRoot("")
	if err != nil {
		return nil, err
	}
	var args []string
	if !build {
		args = append(args, "--check")
	}
	var errb strings.Builder
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "flux", "build.sh"), args...)
	cmd.Dir, cmd.Stderr = root, &errb
	if err := cmd.Run(); err != nil {
		if !build {
			return nil, fmt.Errorf("%s", strings.TrimSpace(errb.String()))
		}
		return nil, fmt.Errorf("building the Flux controllers (hack/flux/build.sh): %w\n%s", err, errb.String())
	}
	bins := map[string]string{}
	for _, name := range FluxControllers {
		version, err := RequiredVersion(filepath.Join(root, "hack", "flux", name, "go.mod"), "github.com/fluxcd/"+name)
		if err != nil {
			return nil, err
		}
		bins[name] = filepath.Join(root, "bin", "flux", name+"-"+version, name)
	}
	return bins, nil
}

// StartFlux starts the controllers, one after the other, each waited for
// until it is ready.
func StartFlux(ctx context.Context, o FluxOptions) (*Flux, error) {
	bins, err := FluxBinaries(ctx, o.Build)
	if err != nil {
		return nil, err
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	storage := filepath.Join(o.Dir, "flux-storage")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return nil, err
	}
	storageAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	f := &Flux{logs: map[string]string{}}
	for _, name := range FluxControllers {
		// A free port picked may be taken by another process before the
		// controller binds it (tests run side by side): source-controller
		// then serves no artifacts and says so once; it is started again
		// on other ports.
		for try := 1; ; try++ {
			err := f.start(name, bins[name], o, storage, storageAddr)
			if err == nil && !strings.Contains(f.Log(name, 200), "address already in use") {
				break
			}
			if err == nil {
				f.stopLast()
				err = fmt.Errorf("%s could not listen: %s", name, f.Log(name, 5))
			}
			if try == 3 || !strings.Contains(err.Error(), "address already in use") {
				f.Stop()
				return nil, err
			}
			if storageAddr, err = freeAddr(); err != nil {
				f.Stop()
				return nil, err
			}
		}
	}
	return f, nil
}

// stopLast stops the controller started last (to start it again).
func (f *Flux) stopLast() {
	i := len(f.procs) - 1
	f.procs[i].Process.Signal(os.Interrupt)
	select {
	case <-f.done[i]:
	case <-time.After(10 * time.Second):
		f.procs[i].Process.Kill()
		<-f.done[i]
	}
	f.procs, f.done = f.procs[:i], f.done[:i]
}

func (f *Flux) start(name, bin string, o FluxOptions, storage, storageAddr string) error {
	health, err := freeAddr()
	if err != nil {
		return err
	}
	metrics, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{
		"--enable-leader-election=false",
		fmt.Sprintf("--watch-all-namespaces=%t", o.WatchAll),
		"--metrics-addr=" + metrics,
		"--health-addr=" + health,
		"--log-level=" + o.LogLevel,
		"--log-encoding=console",
		"--requeue-dependency=1s",
	}
	if name == "source-controller" {
		args = append(args, "--storage-path="+storage, "--storage-addr="+storageAddr, "--storage-adv-addr="+storageAddr)
	}
	logPath := filepath.Join(o.Dir, name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.Kubeconfig, "RUNTIME_NAMESPACE="+o.Namespace)
	cmd.Stdout, cmd.Stderr = log, log
	DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	f.procs, f.done, f.logs[name] = append(f.procs, cmd), append(f.done, done), logPath
	// Ready, and serving metrics: a controller whose metrics port was
	// taken answers /readyz for a moment before it exits.
	for _, url := range []string{"http://" + health + "/readyz", "http://" + metrics + "/metrics"} {
		if err := waitHealthy(url, 60*time.Second, done); err != nil {
			select { // exited: its log is whole
			case <-done:
			case <-time.After(5 * time.Second):
			}
			return fmt.Errorf("%s did not become ready: %v\n%s", name, err, f.Log(name, 60))
		}
	}
	return nil
}

// Stop stops the controllers.
func (f *Flux) Stop() {
	for i, cmd := range f.procs {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-f.done[i]:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-f.done[i]
		}
	}
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

// Logs returns the last lines of every controller's log.
func (f *Flux) Logs(lines int) string {
	var b strings.Builder
	for _, name := range FluxControllers {
		fmt.Fprintf(&b, "--- %s:\n%s\n", name, f.Log(name, lines))
	}
	return b.String()
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
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

// RequiredVersion reads the version a go.mod requires of a module.
func RequiredVersion(gomod, module string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, module)
}
