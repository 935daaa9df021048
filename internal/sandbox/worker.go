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
// outcome to out and returns the process's exit code.
func Serve(in io.Reader, out io.Writer) int {
	c := &conn{r: bufio.NewReaderSize(in, 64<<10), w: bufio.NewWriterSize(out, 64<<10)}
	k, payload, err := readFrame(c.r, maxHostFrame)
	if err != nil {
		fmt.Fprintf(os.Stderr, "render worker: reading the request: %v\n", err)
		return 2
	}
	// The CPU-time limit's first signal: say so before the kernel kills.
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		c.fail(wrapped{"CPU time", errCPU})
		os.Exit(3)
	}()
	switch k {
	case kindRender:
		return c.render(payload)
	case kindTemplate:
		return c.template(payload)
	}
	fmt.Fprintf(os.Stderr, "render worker: a request of unknown kind %d\n", k)
	return 2
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

// watchMemory ends the worker, saying why, once its heap nears limit:
// the virtual memory limit under it would end it too, with less to say.
func (c *conn) watchMemory(limit int64) {
	if limit <= 0 {
		return
	}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		for range time.Tick(10 * time.Millisecond) {
			metrics.Read(sample)
			if used := int64(sample[0].Value.Uint64()); used > limit*9/10 {
				c.fail(wrapped{fmt.Sprintf("%d MiB", used>>20), errMemoryWatch})
				os.Exit(3)
			}
		}
	}()
}

func (c *conn) render(payload []byte) int {
	var req renderRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		c.fail(fmt.Errorf("a render request: %w", err))
		return 1
	}
	c.watchMemory(req.MemoryBytes)
	ro := req.Options
	o := render.Options{ReleaseName: ro.ReleaseName, Capabilities: ro.Capabilities, IncludeCRDs: ro.IncludeCRDs, Origins: ro.Origins, Limits: ro.Limits}
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
	h := resultHeader{Origins: res.Origins, Remote: res.Remote, Objects: len(res.Objects)}
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
	c.awaitHangUp()
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
	c.watchMemory(req.MemoryBytes)
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
