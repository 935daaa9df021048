package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound each worker process. A zero field takes its default.
type Limits struct {
	// Memory bounds a worker's memory (its Go heap and what the runtime
	// maps for it). Default 1 GiB.
	Memory int64 `json:"memory,omitempty"`
	// CPU bounds a worker's CPU time: a render that loops without
	// producing anything ends there. Default 2 minutes. The wall-clock
	// bound is the render's timeout.
	CPU time.Duration `json:"cpu,omitempty"`
}

// Flags that raise each limit, named in errors.
const (
	FlagMemory = "--render-memory-limit"
	FlagCPU    = "--render-cpu-limit"
)

// DefaultLimits are far above what real renders take (kubeflow's largest
// overlay: 310 MiB and 8 CPU-seconds) and far below what takes a
// controller down.
func DefaultLimits() Limits {
	return Limits{Memory: 1 << 30, CPU: 2 * time.Minute}
}

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	if l.CPU <= 0 {
		l.CPU = d.CPU
	}
	return l
}

// DefaultIdle is how many warm workers wait at most by default: enough
// for the domains a burst of renders goes through (a controller's start,
// a moved tag many sources follow: 32 of them took 87% of 1,000 renders
// of 50 sources into warm workers, 8 took 26%), each about 20 MiB of
// its own once idle for a second.
const DefaultIdle = 32

// Options configure a Sandbox.
type Options struct {
	// Command starts a worker; the default is the worker binary beside
	// this one (WorkerBinary) when both are the same build, else this
	// binary with WorkerArg.
	// A test binary names itself (its TestMain serves workers).
	Command []string
	// Env is added to a worker's environment, which otherwise holds only
	// its Go runtime settings.
	Env []string
	// Limits bound each worker.
	Limits Limits
	// Log receives a record of each worker's end; the default discards.
	Log *slog.Logger
	// Observe, if set, is told what each render's worker used (for
	// metrics): when the worker ends, or, for a warm worker, when it
	// answers.
	Observe func(Usage)
	// Idle is how many warm workers wait for another render of their
	// domain at most (default DefaultIdle); negative: none, every render
	// in a worker of its own.
	Idle int
}

// Usage is what one render's worker used.
type Usage struct {
	// CPU is its user and system time (a warm worker's: since the render
	// began).
	CPU time.Duration
	// MaxRSS is its peak resident set, in bytes, as the kernel counted it
	// when the worker gave its answer (a warm worker's: since the render
	// began, where the kernel let it be cleared): the binary's pages,
	// which every worker shares, included.
	MaxRSS int64
	// Private is its anonymous memory when it gave its answer (its heap
	// and stacks, the render's garbage not yet collected included): what
	// is its own, the binary's pages aside. 0 where it was not read.
	Private int64
	// Warm is set when the worker had served an earlier render (of the
	// same domain) before this one.
	Warm bool
	// Killed names the limit that ended it ("timeout", "memory", "CPU"),
	// "" when it ended by itself.
	Killed string
}

// Sandbox starts workers, one per render or template.
type Sandbox struct {
	command []string
	// notOwn says why workers are this binary re-executed rather than
	// the worker binary ("" when they are the worker binary, or a
	// command given).
	notOwn  string
	env     []string
	limits  Limits
	log     *slog.Logger
	observe func(Usage)

	once    sync.Once
	spawner *spawner
	pool    pool
	closed  sync.Once
	shut    atomic.Bool // Close was called: no worker starts
}

// New returns a Sandbox. Workers start on first use.
func New(o Options) (*Sandbox, error) {
	s := &Sandbox{command: o.Command, env: o.Env, limits: o.Limits.WithDefaults(), log: o.Log, observe: o.Observe}
	s.pool.max = o.Idle
	if o.Idle == 0 {
		s.pool.max = DefaultIdle
	}
	if len(s.command) == 0 {
		var err error
		if s.command, s.notOwn, err = workerCommand(); err != nil {
			return nil, err
		}
	}
	bin, err := filepath.EvalSymlinks(s.command[0])
	if err != nil {
		return nil, fmt.Errorf("the render worker's binary: %w", err)
	}
	s.command[0] = bin
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Close ends the warm workers waiting and the thread that starts
// workers. Workers running end with it.
func (s *Sandbox) Close() {
	s.closed.Do(func() {
		s.shut.Store(true)
		s.pool.close()
		if s.spawner != nil {
			s.spawner.close()
		}
	})
}

// Isolation says what workers are and how they are confined, for a log
// line at start: "a process per render (sluice-render), Landlock ABI 7
// (no file but the binary, no TCP), memory 1024 MiB, CPU 2m0s".
func (s *Sandbox) Isolation() string {
	s.start()
	ll := fmt.Sprintf("Landlock ABI %d (no file but the binary, no TCP)", s.spawner.landlock)
	if s.spawner.landlock == 0 {
		ll = "no Landlock: " + s.spawner.why
	}
	bin := filepath.Base(s.command[0])
	if s.notOwn != "" {
		bin += " re-executed, not " + WorkerBinary + ": " + s.notOwn
	}
	per := "a process per render"
	if s.pool.max > 0 {
		per = fmt.Sprintf("processes kept warm per namespace and source commit (up to %d idle, %d renders each, state reset and checked between renders)", s.pool.max, maxUses)
	}
	return fmt.Sprintf("%s (%s), %s, memory %d MiB, CPU %s per render", per, bin, ll, s.limits.Memory>>20, s.limits.CPU)
}

// Confinement says how workers are confined: the Landlock ABI that
// confines them, or 0 and why they run without one (no file or network
// confinement: only the limits and the empty environment hold).
func (s *Sandbox) Confinement() (landlock int, why string) {
	s.start()
	return s.spawner.landlock, s.spawner.why
}

func (s *Sandbox) start() {
	s.once.Do(func() { s.spawner = newSpawner(s.command[0]) })
}

// worker is one running worker process.
type worker struct {
	cmd    *exec.Cmd
	in     *bufio.Writer
	out    *bufio.Reader
	stderr *tailBuffer
	limits Limits
	// killed says why the host killed it ("" when it did not).
	mu     sync.Mutex
	killed string
	exited chan struct{}
	state  *os.ProcessState
	// closers are the host's ends of the pipes.
	closers []*os.File
	observe func(Usage)
	// peak is the worker's peak resident set when it answered or was
	// killed, and private its anonymous memory when it answered, under
	// mu.
	peak, private int64
	// warm is a worker kept for further renders of its domain; uses is
	// how many it began, cpuBase the CPU time it had used before the
	// current one.
	warm    bool
	uses    int
	cpuBase time.Duration
}

// answered is the host's part once the worker's answer is read: the
// worker, waiting for it, still runs, so what it used is read now; then
// its input is closed, and it exits.
func (w *worker) answered() {
	if w.observe != nil {
		w.notePeak()
		p := anonymous(w.cmd.Process.Pid)
		w.mu.Lock()
		w.private = p
		w.mu.Unlock()
	}
	if w.warm {
		w.observeRender()
		return
	}
	w.closers[0].Close()
}

// observeRender tells the observer what a warm worker, which stays, used
// for the render it answered: what it used since the render began.
func (w *worker) observeRender() {
	if w.observe == nil {
		return
	}
	w.mu.Lock()
	u := Usage{CPU: processCPU(w.cmd.Process.Pid) - w.cpuBase, MaxRSS: w.peak, Private: w.private, Warm: w.uses > 1}
	w.mu.Unlock()
	w.observe(u)
}

// notePeak reads the worker's peak resident set, while it runs.
func (w *worker) notePeak() {
	w.setPeak(peakRSS(w.cmd.Process.Pid))
}

// setPeak records a peak resident set the worker reached.
func (w *worker) setPeak(p int64) {
	w.mu.Lock()
	w.peak = max(w.peak, p)
	w.mu.Unlock()
}

// anonymous is a running process's anonymous memory in bytes (the
// Anonymous line of smaps_rollup), 0 where it cannot be read.
func anonymous(pid int) int64 { return procKB(pid, "smaps_rollup", "Anonymous:") }

// peakRSS is a running process's peak resident set in bytes (VmHWM), 0
// where it cannot be read (the process ended). Not its rusage: a vfork's
// child takes its parent's high-water mark into its own at exec.
func peakRSS(pid int) int64 { return procKB(pid, "status", "VmHWM:") }

// procKB reads a line "key N kB" of a running process's /proc file, in
// bytes; 0 where it cannot be read.
func procKB(pid int, file, key string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, key); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// startupDirs are where the worker's start-up finds the directories this
// binary's libraries make when a process of it starts (controller-runtime's
// envtest, linked for `sluice dev cluster`, makes its cache directory
// then, and panics where it cannot): those this process made, which the
// worker finds made, and so makes nothing.
func startupDirs() []string {
	out := []string{"TMPDIR=" + os.TempDir()}
	if d, err := os.UserCacheDir(); err == nil {
		out = append(out, "XDG_CACHE_HOME="+d)
	}
	return out
}

// addressSpace is what a worker's virtual memory may reach: its memory
// limit and what a Go process reserves beyond its heap (the runtime's
// page summaries and arena map, thread stacks, the binary): about 1.7
// GiB of address space, almost none of it memory. The heap itself is
// watched (watchMemory), under a soft limit; this is the backstop.
func addressSpace(memory int64) int64 { return memory + 2<<30 }

// spawn starts a worker under limits; a warm one may serve up to
// maxUses renders, each under limits (prepare).
// errClosed is a render asked of a Sandbox after Close.
var errClosed = errors.New("the render sandbox is closed")

func (s *Sandbox) spawn(limits Limits, warm bool) (*worker, error) {
	if s.shut.Load() {
		return nil, errClosed
	}
	s.start()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: s.command[0], Args: s.command, Stdin: inR, Stdout: outW, Stderr: errW,
		// Nothing of this process's environment: no credentials, no
		// proxy, no home. The Go runtime collects at twice the live heap
		// (a warm worker's small renders at GOGC 400 left it five times
		// what it kept: BENCHMARKS.md), under a soft limit that keeps a
		// large render near its live heap.
		Env: append(append([]string{
			"GOGC=200",
			fmt.Sprintf("GOMEMLIMIT=%d", min(limits.Memory*3/4, 256<<20)),
			"GOTRACEBACK=single",
		}, startupDirs()...), s.env...),
		SysProcAttr: workerProcAttr(),
	}
	err = s.spawner.start(cmd)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("starting a render worker: %w", err)
	}
	w := &worker{cmd: cmd, in: bufio.NewWriterSize(inW, 64<<10), out: bufio.NewReaderSize(outR, 64<<10),
		stderr: &tailBuffer{max: 16 << 10}, limits: limits, exited: make(chan struct{}), observe: s.observe, warm: warm}
	cpu := cpuSeconds(limits.CPU)
	// The hard limit is where the kernel kills, a second past the soft
	// one; a warm worker's soft limit moves with each render (prepare),
	// within a hard limit of all its renders' time.
	hard := cpu + 1
	if warm {
		hard = cpu*(maxUses+1) + 1
	}
	if err := setLimits(cmd.Process.Pid, addressSpace(limits.Memory), cpu, hard); err != nil {
		w.kill("")
		w.wait()
		return nil, fmt.Errorf("limiting a render worker: %w", err)
	}
	go func() {
		w.stderr.ReadFrom(errR)
		errR.Close()
	}()
	w.closers = []*os.File{inW, outR}
	go func() {
		w.state, _ = cmd.Process.Wait()
		close(w.exited)
	}()
	return w, nil
}

// report tells the Sandbox's observer what the worker used, once it
// ended, and why it ended where one of its limits did.
func (w *worker) report(err error) {
	if w.observe == nil || w.state == nil {
		return
	}
	w.mu.Lock()
	u := Usage{CPU: w.state.UserTime() + w.state.SystemTime() - w.cpuBase, MaxRSS: w.peak, Private: w.private, Warm: w.uses > 1}
	w.mu.Unlock()
	var ke *KilledError
	switch {
	case errors.As(err, &ke):
		u.Killed = ke.Limit
	case w.killedFor() == "timeout":
		u.Killed = "timeout"
	}
	w.observe(u)
}

// close releases the worker's pipes, once its host is done with them
// (what it wrote before it ended is read to the end first).
func (w *worker) close() {
	for _, f := range w.closers {
		f.Close()
	}
}

// kill ends the worker's process group, remembering why.
func (w *worker) kill(why string) {
	w.mu.Lock()
	if w.killed == "" {
		w.killed = why
	}
	w.mu.Unlock()
	if w.observe != nil {
		w.notePeak()
	}
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
}

// killedFor says why the host killed the worker ("" when it did not).
func (w *worker) killedFor() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.killed
}

// wait waits for the worker to end: at once after its last message, or
// killed if it lingers.
func (w *worker) wait() *os.ProcessState {
	select {
	case <-w.exited:
	case <-time.After(5 * time.Second):
		w.kill("")
		<-w.exited
	}
	return w.state
}

// watch kills the worker when ctx ends or its deadline passes, until
// stop is called.
func (w *worker) watch(ctx context.Context, deadline time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(deadline)
		defer t.Stop()
		select {
		case <-ctx.Done():
			w.kill("canceled")
		case <-t.C:
			w.kill("timeout")
		case <-done:
		case <-w.exited:
		}
	}()
	return func() { close(done) }
}

// died explains a worker that ended without a result: the limit it
// reached, and what it last read.
func (w *worker) died(ctx context.Context, deadline time.Duration, last string, timeoutErr error) error {
	state := w.wait()
	killed := w.killedFor()
	reading := ""
	if last != "" {
		reading = fmt.Sprintf("; it last read %s", last)
	}
	var cpu time.Duration
	if state != nil {
		cpu = state.UserTime() + state.SystemTime() - w.cpuBase
	}
	stderr := w.stderr.String()
	switch {
	case killed == "canceled":
		return ctx.Err()
	case killed == "timeout":
		return fmt.Errorf("%w (the worker was killed after %s%s)", timeoutErr, deadline, reading)
	case cpu >= w.limits.CPU || signaled(state, syscall.SIGXCPU):
		return &KilledError{Limit: "CPU", Got: cpu.Round(time.Millisecond).String(), Max: w.limits.CPU.String(), Flag: FlagCPU, Last: last}
	case strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") || strings.Contains(stderr, "failed to create new OS thread"):
		return &KilledError{Limit: "memory", Max: fmt.Sprintf("%d MiB", w.limits.Memory>>20), Flag: FlagMemory, Last: last}
	}
	detail := lastLine(stderr)
	if detail == "" && state != nil {
		detail = state.String()
	}
	return fmt.Errorf("the render worker died: %s%s", detail, reading)
}

// KilledError is a worker ended by one of its limits.
type KilledError struct {
	// Limit is what was reached: "memory" or "CPU"; Got and Max how much.
	Limit, Got, Max string
	// Flag raises the limit.
	Flag string
	// Last is the last file the worker read, where it was.
	Last string
}

func (e *KilledError) Error() string {
	got := ""
	if e.Got != "" {
		got = " (" + e.Got + ")"
	}
	msg := fmt.Sprintf("the render was killed at its %s limit of %s%s; raise it with %s if this is expected", e.Limit, e.Max, got, e.Flag)
	if e.Last != "" {
		msg += "; it last read " + e.Last
	}
	return msg
}

func signaled(state *os.ProcessState, sig syscall.Signal) bool {
	if state == nil {
		return false
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// lastLine is the last non-empty line of s: a Go runtime's fatal error,
// or the worker's own.
func lastLine(s string) string {
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "render worker:") {
			return strings.TrimSpace(l)
		}
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailBuffer keeps the first bytes written to it (where the Go runtime
// says why it failed), up to max.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) ReadFrom(r interface{ Read([]byte) (int, error) }) {
	p := make([]byte, 4096)
	for {
		n, err := r.Read(p)
		t.mu.Lock()
		if room := t.max - t.buf.Len(); room > 0 {
			t.buf.Write(p[:min(n, room)])
		}
		t.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// errWorkerGone is a worker whose pipe closed.
var errWorkerGone = errors.New("the worker ended")
