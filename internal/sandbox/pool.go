package sandbox

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Domain is whom a render belongs to. The renders of one namespace's
// syncs of one source commit trust each other: they read the same files
// and write where that namespace may write. A worker kept warm serves the
// renders of one domain only, and between two of them puts its process
// back as it found it and checks that it did (render.ResetProcessState,
// warmState), or ends. The zero Domain is a render of its own, in a
// worker of its own.
type Domain struct {
	// Namespace is the namespace of the sync rendered.
	Namespace string
	// Source is the source repository and commit rendered ("" for a
	// working tree, whose files can change between renders: a worker of
	// its own).
	Source string
}

func (d Domain) warm() bool  { return d.Source != "" }
func (d Domain) key() string { return d.Namespace + "\x00" + d.Source }

const (
	// maxUses is how many renders a warm worker serves before it ends: a
	// bound on what a heap and a process can drift over time.
	maxUses = 100
	// idleFor is how long a warm worker waits for another render of its
	// domain: a burst's renders come within it.
	idleFor = 10 * time.Second
	// readyWithin bounds a worker's reset and check after a render (a
	// schema parsed again is tens of milliseconds).
	readyWithin = 10 * time.Second
)

// pool holds the warm workers waiting for a render, most recent last,
// and counts those resting (resetting after a render) by domain: a render
// waits for one of those rather than start a worker (a reset takes
// milliseconds, a start tens).
type pool struct {
	mu     sync.Mutex
	cond   *sync.Cond
	idle   []*idleWorker
	max    int
	closed bool
	// resting counts a domain's workers resetting; awaited, the renders
	// waiting for one of them.
	resting, awaited map[string]int
}

type idleWorker struct {
	w     *worker
	key   string
	timer *time.Timer
}

// take hands out the most recently idle worker of a domain, waiting for
// one resting when more rest than other renders wait for; nil when none.
func (p *pool) take(key string) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if w := p.takeIdle(key); w != nil {
			return w
		}
		if p.closed || p.resting[key] <= p.awaited[key] {
			return nil
		}
		p.awaited[key]++
		p.cond.Wait()
		p.awaited[key]--
	}
}

// rests counts a worker of domain key resting, until done is called.
func (p *pool) rests(key string) (done func()) {
	p.mu.Lock()
	p.lazyInit()
	p.resting[key]++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.resting[key]--; p.resting[key] == 0 {
			delete(p.resting, key)
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
}

func (p *pool) lazyInit() {
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
		p.resting, p.awaited = map[string]int{}, map[string]int{}
	}
}

// takeIdle takes an idle worker of domain key, under mu.
func (p *pool) takeIdle(key string) *worker {
	p.lazyInit()
	for i := len(p.idle) - 1; i >= 0; i-- {
		iw := p.idle[i]
		if iw.key != key {
			continue
		}
		p.idle = append(p.idle[:i], p.idle[i+1:]...)
		iw.timer.Stop()
		select {
		case <-iw.w.exited:
			go iw.w.retire()
			continue
		default:
		}
		return iw.w
	}
	return nil
}

// put keeps a worker, reset and checked, for its domain's next render;
// the oldest idle worker ends when too many wait.
func (p *pool) put(key string, w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.max <= 0 || w.uses >= maxUses {
		go w.retire()
		return
	}
	if len(p.idle) >= p.max {
		oldest := p.idle[0]
		p.idle = p.idle[1:]
		oldest.timer.Stop()
		go oldest.w.retire()
	}
	iw := &idleWorker{w: w, key: key}
	iw.timer = time.AfterFunc(idleFor, func() {
		p.mu.Lock()
		for i, x := range p.idle {
			if x == iw {
				p.idle = append(p.idle[:i], p.idle[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		w.retire()
	})
	p.idle = append(p.idle, iw)
}

// close ends every idle worker, and those put back after.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	if p.cond != nil {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
	for _, iw := range idle {
		iw.timer.Stop()
		iw.w.retire()
	}
}

// idleCount is how many workers wait.
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// retire ends a worker the host is done with: its input closed, it ends
// by itself (killed if it lingers).
func (w *worker) retire() {
	w.closers[0].Close()
	w.wait()
	w.close()
}

// rest waits, after a render, for a warm worker to say it is reset and
// checked, then keeps it for its domain; a worker that says anything
// else, or nothing in time, ends.
func (s *Sandbox) rest(d Domain, w *worker, done func()) {
	defer done()
	t := time.AfterFunc(readyWithin, func() { w.kill("") })
	k, _, err := readFrame(w.out, 0)
	t.Stop()
	if err != nil || k != kindReady {
		s.log.Debug("a warm render worker was not reused", "pid", w.cmd.Process.Pid, "stderr", lastLine(w.stderr.String()))
		w.kill("")
		w.wait()
		w.close()
		return
	}
	s.pool.put(d.key(), w)
}

// prepare readies a warm worker for its next render: what it has used
// so far is noted (its next render is measured from there), its peak
// resident set is cleared, and its CPU-time limit moved to the render's
// own limit past what it used.
func (w *worker) prepare() error {
	pid := w.cmd.Process.Pid
	w.cpuBase = processCPU(pid)
	w.uses++
	w.mu.Lock()
	w.peak, w.private = 0, 0
	w.mu.Unlock()
	// Only a process's owner can clear its peak: where that fails, the
	// peak reported is the worker's since it started.
	os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	soft := uint64(math.Ceil(w.cpuBase.Seconds())) + cpuSeconds(w.limits.CPU)
	return setCPUSoft(pid, soft)
}

// cpuSeconds is a CPU-time limit in whole seconds, rounded up.
func cpuSeconds(d time.Duration) uint64 { return uint64((d + time.Second - 1) / time.Second) }

// processCPU is a running process's user and system time, all its
// threads together (0 where it cannot be read).
func processCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	// Fields 14 and 15 of the file (utime, stime), in clock ticks of
	// USER_HZ, 100 on Linux.
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
