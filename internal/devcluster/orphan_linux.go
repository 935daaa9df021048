package devcluster

import (
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// DieWithParent makes cmd's process receive SIGKILL when the process that
// started it dies, however it dies (a test binary panicking at its
// timeout runs no cleanup): a server started for a test or a dev cluster
// does not outlive it, loading the machine. The signal follows the thread
// that started it; Go ends a thread only when a goroutine locked to it
// returns, which the goroutines starting these servers never are.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// startReaper kills, once this process is gone, every process whose
// command line names dir: envtest starts etcd and the API server in
// process groups of their own with no parent-death signal, and no hook to
// add one. The reaper asks every second whether this process lives; stop
// ends it.
func startReaper(dir string) (stop func()) {
	cmd := exec.Command("sh", "-c", `while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec pkill -KILL -f -- "$2"`,
		"sluice-reaper", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		slog.Warn("no reaper for the control plane: it outlives this process if it dies unstopped", "error", err)
		return func() {}
	}
	go cmd.Wait()
	return func() { cmd.Process.Kill() }
}
