//go:build !linux

package sandbox

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// spawner starts workers. Landlock, the other process's resource limits
// (prlimit) and the death signal are Linux's: elsewhere (macOS, a
// person's laptop) a worker is a process of its own, in a process group
// of its own, and nothing more; the controller runs on Linux.
type spawner struct {
	mu       sync.Mutex
	closed   bool
	landlock int
	why      string
}

func newSpawner(string) *spawner {
	return &spawner{why: "Landlock and resource limits are Linux's; this is " + runtime.GOOS}
}

func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return cmd.Start()
}

func (s *spawner) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

func workerProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// setLimits cannot limit another process here (no prlimit): a worker
// runs with this process's limits.
func setLimits(int, int64, uint64, uint64) error { return nil }

func setCPUSoft(int, uint64) error { return nil }
