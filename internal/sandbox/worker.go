package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
	"text/template"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/render"
)

// WorkerArg is the argument that makes the binary a worker:
// `sluice render-worker`, run by a Sandbox, never by a person.
const WorkerArg = "render-worker"

// IsWorker reports whether a process was started as a worker (its first
// argument is WorkerArg): main, and the TestMain of packages whose tests
// start workers from the test binary, hand it to Serve.
func IsWorker(args []string) bool { return len(args) > 1 && args[1] == WorkerArg }

// maxHostFrame bounds what a worker takes from its host: a file, an
// archive or a remote file, within the render's own limits.
const maxHostFrame = 1 << 30

// Serve is a worker's life: it reads one request from in, evaluates it
// (calling back through in and out for every file it needs), writes the
// outcome to out and returns the process's exit code. A render request
// marked warm is followed, once its outcome is written, by the worker
// putting its process back as it found it (render.ResetProcessState) and
// checking it is (warmState): only then does it say it is ready for
// another request of its host, which it reads next; else it ends.
func Serve(in io.Reader, out io.Writer) int {
	c := &conn{r: bufio.NewReaderSize(in, 64<<10), w: bufio.NewWriterSize(out, 64<<10)}
	// The CPU-time limit's first signal: say so before the kernel kills.
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		c.fail(wrapped{"CPU time", errCPU})
		os.Exit(3)
	}()
	var fresh *warmState
	var free *time.Timer
	for n := 0; ; n++ {
		k, payload, err := readFrame(c.r, maxHostFrame)
		if free != nil {
			free.Stop()
		}
		if n > 0 && errors.Is(err, io.EOF) {
			return 0 // the host is done with this worker
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "render worker: reading the request: %v\n", err)
			return 2
		}
		switch k {
		case kindRender:
			var req renderRequest
			if err := json.Unmarshal(payload, &req); err != nil {
				c.fail(fmt.Errorf("a render request: %w", err))
				return 1
			}
			if req.Warm && fresh == nil {
				// What a render may change, before the first one.
				fresh = takeWarmState()
			}
			code := c.render(req)
			if !req.Warm {
				c.awaitHangUp()
				return code
			}
			if why := fresh.restore(); why != "" {
				fmt.Fprintf(os.Stderr, "render worker: not reused: %s\n", why)
				return code
			}
			if c.send(kindReady, nil) != nil {
				return code
			}
			free = time.AfterFunc(idleFree, debug.FreeOSMemory)
		case kindTemplate:
			if n > 0 {
				fmt.Fprintln(os.Stderr, "render worker: a template request to a warm worker")
				return 2
			}
			return c.template(payload)
		default:
			fmt.Fprintf(os.Stderr, "render worker: a request of unknown kind %d\n", k)
			return 2
		}
	}
}

// idleFree is how long a warm worker waits for its next render before
// it returns its heap to the system, so that a worker idle holds little.
// Returning it after every render would cost more than the render: the
// next one faults it in again (6 ms more for a 4 ms overlay, measured).
const idleFree = time.Second

// warmState is what of a worker process a render may change, as it was
// before the first render: what the render engines hold process-wide,
// and the goroutines running.
type warmState struct {
	engines    string
	goroutines int
}

func takeWarmState() *warmState {
	return &warmState{engines: render.ProcessState(), goroutines: runtime.NumGoroutine()}
}

// restore puts the process back as the first render found it, and says
// why it cannot ("" when it is): a goroutine a render started still
// running, or engine state that a reset does not bring back.
func (s *warmState) restore() string {
	if s.engines != render.ProcessState() {
		render.ResetProcessState()
		if s.engines != render.ProcessState() {
			return "the render engines' process-wide state differs from before the first render after a reset"
		}
	}
	// A render's goroutines end with it; one left may still be ending.
	n := runtime.NumGoroutine()
	for wait := time.Millisecond; n > s.goroutines && wait < 256*time.Millisecond; wait *= 2 {
		time.Sleep(wait)
		n = runtime.NumGoroutine()
	}
	if n > s.goroutines {
		return fmt.Sprintf("%d goroutines running, %d before the first render", n, s.goroutines)
	}
	return ""
}

// errCPU marks a worker's own report of its CPU-time limit.
var errCPU = errors.New("cpu limit")

// conn is a worker's side of its pipes: one call at a time, each frame
// written whole.
type conn struct {
	r      *bufio.Reader
	w      *bufio.Writer
	callMu sync.Mutex
	sendMu sync.Mutex
}

func (c *conn) send(k kind, payload []byte) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return writeFrame(c.w, k, payload)
}

// call asks the host and waits for its answer.
func (c *conn) call(k kind, payload []byte) ([]byte, error) {
	c.callMu.Lock()
	defer c.callMu.Unlock()
	if err := c.send(k, payload); err != nil {
		return nil, err
	}
	rk, reply, err := readFrame(c.r, maxHostFrame)
	if err != nil {
		return nil, err
	}
	switch rk {
	case kindOK:
		return reply, nil
	case kindErr:
		return nil, decodeError(reply)
	}
	return nil, fmt.Errorf("an answer of unknown kind %d", rk)
}

// fail reports the request's failure.
func (c *conn) fail(err error) {
	w := wireError{}
	json.Unmarshal(encodeError(err), &w)
	if errors.Is(err, errCPU) {
		w.Kind = "cpu"
	}
	if errors.Is(err, errMemoryWatch) {
		w.Kind = errMemory
	}
	data, _ := json.Marshal(w)
	c.send(kindFailed, data)
}

// errMemoryWatch marks a worker's own report of its memory limit.
var errMemoryWatch = errors.New("memory limit")

// watchMemory ends the worker, saying why, once its heap nears limit
// (the virtual memory limit under it would end it too, with less to
// say), until stop is called: a render's watch, which stops with it (a
// warm worker waiting wakes for nothing), and has ended when stop
// returns.
func (c *conn) watchMemory(limit int64) (stop func()) {
	if limit <= 0 {
		return func() {}
	}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if used := int64(sample[0].Value.Uint64()); used > limit*9/10 {
				c.fail(wrapped{fmt.Sprintf("%d MiB", used>>20), errMemoryWatch})
				os.Exit(3)
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

func (c *conn) render(req renderRequest) int {
	defer c.watchMemory(req.MemoryBytes)()
	ro := req.Options
	o := render.Options{ReleaseName: ro.ReleaseName, Capabilities: ro.Capabilities, IncludeCRDs: ro.IncludeCRDs, Origins: ro.Origins, Limits: ro.Limits, Generate: ro.Generate}
	if len(ro.Render) > 0 {
		o.Render = &v1alpha1.Render{}
		if err := json.Unmarshal(ro.Render, o.Render); err != nil {
			c.fail(fmt.Errorf("a render request: %w", err))
			return 1
		}
	}
	if req.Has.Bases {
		o.Bases = c.base
	}
	if req.Has.Fetch {
		o.Fetch = c.fetch
	}
	if req.Has.Charts {
		o.ChartArchive = c.chart
	}
	if req.Has.Cluster {
		o.Cluster = c.capabilities
	}
	cache := &fsCache{}
	tracked := &remoteFS{c: c, id: 0, tracked: true, cache: cache}
	raw := &remoteFS{c: c, id: 0, cache: cache}
	res, err := render.RenderTracked(context.Background(), tracked, raw, req.Dir, o)
	if err != nil {
		c.fail(err)
		return 1
	}
	data, err := res.YAML()
	if err != nil {
		c.fail(err)
		return 1
	}
	h := resultHeader{Origins: res.Origins, Remote: res.Remote, Objects: len(res.Objects), Generated: res.Generated, Lookups: res.Lookups, Unkeyed: res.Unkeyed, Values: res.Values}
	h.Renderer, _ = json.Marshal(res.Renderer)
	if res.Chart != nil {
		h.Chart, _ = json.Marshal(res.Chart)
	}
	hdr, _ := json.Marshal(h)
	msg := binary.AppendUvarint(nil, uint64(len(hdr)))
	msg = append(append(msg, hdr...), data...)
	if err := c.send(kindResult, msg); err != nil {
		return 1
	}
	return 0
}

func (c *conn) base(_ context.Context, url string) (*render.Base, error) {
	reply, err := c.call(kindBase, []byte(url))
	if err != nil {
		return nil, err
	}
	var b baseReply
	if err := json.Unmarshal(reply, &b); err != nil {
		return nil, err
	}
	return &render.Base{FS: &remoteFS{c: c, id: b.FS, cache: &fsCache{}}, Dir: b.Dir, ID: b.ID}, nil
}

func (c *conn) fetch(_ context.Context, url string, max int64) ([]byte, error) {
	payload, _ := json.Marshal(fetchCall{URL: url, Max: max})
	return c.call(kindFetch, payload)
}

func (c *conn) chart(_ context.Context, ref v1alpha1.HelmChart) ([]byte, v1alpha1.PinnedChart, error) {
	var pinned v1alpha1.PinnedChart
	payload, _ := json.Marshal(ref)
	reply, err := c.call(kindChart, payload)
	if err != nil {
		return nil, pinned, err
	}
	n, k := binary.Uvarint(reply)
	if k <= 0 || uint64(len(reply)-k) < n {
		return nil, pinned, errors.New("a malformed chart answer")
	}
	if err := json.Unmarshal(reply[k:k+int(n)], &pinned); err != nil {
		return nil, pinned, err
	}
	return reply[k+int(n):], pinned, nil
}

func (c *conn) capabilities(context.Context) (render.Capabilities, error) {
	var caps render.Capabilities
	reply, err := c.call(kindCaps, nil)
	if err == nil {
		err = json.Unmarshal(reply, &caps)
	}
	return caps, err
}

// template executes a text/template within its output bound: every
// write past it fails the execution, and the functions that make large
// strings in one call (printf of a huge width) are bounded before they
// make them.
func (c *conn) template(payload []byte) int {
	var req templateRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		c.fail(fmt.Errorf("a template request: %w", err))
		return 1
	}
	defer c.watchMemory(req.MemoryBytes)()
	out, err := ExecuteTemplate(req.Name, req.Text, req.Data, req.MaxBytes)
	if err != nil {
		c.fail(err)
		return 1
	}
	if err := c.send(kindResult, []byte(out)); err != nil {
		return 1
	}
	c.awaitHangUp()
	return 0
}

// awaitHangUp waits, once the answer is sent, for the host to close its
// end: until then the host can read what this process used (its peak
// resident set is gone once it exits).
func (c *conn) awaitHangUp() {
	io.Copy(io.Discard, c.r)
}

// ExecuteTemplate executes a text/template in this process, its output
// bounded to maxBytes (missing keys are errors). Its time is not bounded:
// a template someone else wrote runs in a worker (Sandbox.Template).
func ExecuteTemplate(name, text string, data any, maxBytes int) (string, error) {
	out := &limitedBuffer{max: maxBytes}
	t, err := template.New(name).Option("missingkey=error").Funcs(boundedPrint(maxBytes)).Parse(text)
	if err == nil {
		err = t.Execute(out, data)
	}
	return out.String(), err
}

// limitedBuffer fails every write past max bytes.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

// errTemplateOutput is a template's output past its bound.
var errTemplateOutput = errors.New("output over its limit")

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("%w of %d bytes", errTemplateOutput, b.max)
	}
	return b.Buffer.Write(p)
}

// boundedPrint replaces the printing built-ins with ones that refuse,
// before making it, a string past max bytes.
func boundedPrint(max int) template.FuncMap {
	check := func(name string, s string) (string, error) {
		if len(s) > max {
			return "", fmt.Errorf("%s: %d bytes, %w of %d bytes", name, len(s), errTemplateOutput, max)
		}
		return s, nil
	}
	return template.FuncMap{
		"printf": func(format string, args ...any) (string, error) {
			if n := widest(format, args); n > max {
				return "", fmt.Errorf("printf: a width of %d, %w of %d bytes", n, errTemplateOutput, max)
			}
			return check("printf", fmt.Sprintf(format, args...))
		},
		"print":   func(args ...any) (string, error) { return check("print", fmt.Sprint(args...)) },
		"println": func(args ...any) (string, error) { return check("println", fmt.Sprintln(args...)) },
	}
}

// widest is the largest width or precision a format string's verbs ask
// for ("%0999999d"), and, where one takes it from the arguments ("%*d"),
// the largest integer argument.
func widest(format string, args []any) int {
	widest := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format) && (format[i] == '+' || format[i] == '-' || format[i] == '#' || format[i] == ' ' || format[i] == '0'); i++ {
		}
		n := 0
		for ; i < len(format) && (format[i] >= '0' && format[i] <= '9' || format[i] == '.' || format[i] == '*'); i++ {
			switch c := format[i]; {
			case c == '*':
				for _, a := range args {
					if v, ok := a.(int); ok {
						widest = max(widest, v)
					}
				}
			case c == '.':
				n = 0
			case n < 1<<30:
				n = n*10 + int(c-'0')
				widest = max(widest, n)
			}
		}
	}
	return widest
}
