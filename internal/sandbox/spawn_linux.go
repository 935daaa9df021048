package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// spawner starts workers from one OS thread of its own, which it
// confines first: a Landlock domain that lets a process open nothing but
// the worker's binary (and the libraries that load it), connect and bind
// no TCP port, signal no process and reach no abstract socket outside it;
// and no new privileges. A process started from that thread inherits the
// domain, whatever it does after: the rest of this process is unconfined,
// and the worker is confined from its first instruction.
type spawner struct {
	mu     sync.Mutex
	closed bool
	reqs   chan spawnReq
	// landlock is the Landlock ABI confining the workers (0: none: the
	// kernel has no Landlock, or refused it), and why not.
	landlock int
	why      string
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// newSpawner starts the spawning thread, confined to let workers execute
// bin and nothing else.
func newSpawner(bin string) *spawner {
	s := &spawner{reqs: make(chan spawnReq)}
	ready := make(chan struct{})
	go func() {
		// The thread stays locked for its life and ends with the
		// goroutine: its confinement never reaches another goroutine.
		runtime.LockOSThread()
		s.landlock, s.why = confineThread(bin)
		close(ready)
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	<-ready
	return s
}

// start starts cmd from the confined thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.reqs <- spawnReq{cmd: cmd, done: done}
	s.mu.Unlock()
	return <-done
}

// close ends the spawning thread; a later start fails.
func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
}

// Landlock's rights, by the ABI that brought them.
const (
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	netRightsV4 = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	scopesV6    = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
)

// landlockAttr is the ruleset attribute of the ABIs Sluice knows (the
// kernel takes a shorter one than it knows of).
type landlockAttr struct {
	fs, net, scoped uint64
}

// confineThread confines the calling thread, returning the Landlock ABI
// in effect (0 when none is) and why not.
func confineThread(bin string) (int, string) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, fmt.Sprintf("this kernel has no Landlock (%v)", errno)
	}
	attr := landlockAttr{fs: fsRightsV1}
	size := unsafe.Sizeof(uint64(0)) // the fs rights: ABI 1
	if abi >= 2 {
		attr.fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		attr.fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 4 {
		attr.net = netRightsV4
		size = 2 * unsafe.Sizeof(uint64(0))
	}
	if abi >= 5 {
		attr.fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 6 {
		attr.scoped = scopesV6
		size = unsafe.Sizeof(attr)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return 0, fmt.Sprintf("creating a Landlock ruleset: %v", errno)
	}
	defer unix.Close(int(fd))
	exec := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE)
	if err := allowPath(int(fd), bin, exec); err != nil {
		return 0, err.Error()
	}
	// A dynamically linked binary needs its loader and libraries.
	if dynamic(bin) {
		for _, p := range []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib"} {
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				allowPath(int(fd), p, exec|unix.LANDLOCK_ACCESS_FS_READ_DIR)
			}
		}
		allowPath(int(fd), "/etc/ld.so.cache", unix.LANDLOCK_ACCESS_FS_READ_FILE)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Sprintf("no_new_privs: %v", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return 0, fmt.Sprintf("Landlock refused: %v", errno)
	}
	return int(abi), ""
}

// allowPath grants access beneath path (a file: to it).
func allowPath(ruleset int, path string, access uint64) error {
	f, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s for the Landlock ruleset: %w", path, err)
	}
	defer unix.Close(f)
	if info, err := os.Stat(path); err == nil && !info.IsDir() {
		access &^= unix.LANDLOCK_ACCESS_FS_READ_DIR
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(f)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("a Landlock rule for %s: %w", path, errno)
	}
	return nil
}

// dynamic reports whether an executable needs a dynamic loader.
func dynamic(bin string) bool {
	f, err := elf.Open(bin)
	if err != nil {
		return true // unknown: let the loader's files be read
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// setLimits sets a started worker's resource limits: its virtual memory
// (the Go runtime fails an allocation past it, and says so), its CPU
// time (a signal at the soft limit, a kill at the hard one), no core
// file, no file written, few descriptors. The worker has read nothing
// yet: its request is sent after.
func setLimits(pid int, addressSpace int64, cpuSoft, cpuHard uint64) error {
	limits := []struct {
		resource int
		cur, max uint64
	}{
		{unix.RLIMIT_AS, uint64(addressSpace), uint64(addressSpace)},
		{unix.RLIMIT_CPU, cpuSoft, cpuHard},
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_FSIZE, 0, 0},
		{unix.RLIMIT_NOFILE, 64, 64},
	}
	var errs []error
	for _, l := range limits {
		if err := unix.Prlimit(pid, l.resource, &unix.Rlimit{Cur: l.cur, Max: l.max}, nil); err != nil {
			errs = append(errs, fmt.Errorf("limit %d: %w", l.resource, err))
		}
	}
	return errors.Join(errs...)
}

// workerProcAttr starts a worker in a process group of its own (killed
// as one), killed when this process dies.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// setCPUSoft moves a warm worker's soft CPU limit to soft seconds, within
// its hard limit.
func setCPUSoft(pid int, soft uint64) error {
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, nil, &cur); err != nil {
		return err
	}
	if soft >= cur.Max {
		return fmt.Errorf("the worker has used its CPU time")
	}
	return unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: soft, Max: cur.Max}, nil)
}
