package sandbox

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"time"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// Render renders the folder dir of fsys as render.Render does, in a worker
// process: the worker asks for every file it reads, and this process
// bounds what it reads (within o.Limits) and records it (the Result's
// Inputs); remote bases, files and charts are opened here through o's
// functions, never by the worker. Past o.Limits.Timeout, or when ctx
// ends, the worker is killed.
//
// A folder of plain YAML runs no engine, only the YAML parser this
// process runs on every worker's answer: it is parsed here, within the
// same limits (the output's among them, checked as files are read), as
// Argo CD's repo-server reads a directory source itself.
func (s *Sandbox) Render(ctx context.Context, fsys source.FS, dir string, o render.Options) (*render.Result, error) {
	return s.RenderIn(ctx, Domain{}, fsys, dir, o)
}

// RenderIn renders as Render does, in a worker of domain d: one kept warm
// by an earlier render of d when one waits, else a new one, kept for d's
// next render once it has reset and checked its state. A worker that
// failed for a limit, a timeout or anything but the render's own error
// is never kept.
func (s *Sandbox) RenderIn(ctx context.Context, d Domain, fsys source.FS, dir string, o render.Options) (*render.Result, error) {
	if o.Kustomization != nil || o.PostBuild != nil || o.Read != nil {
		// Functions of this process cannot run in a worker: never render
		// without them, silently.
		return nil, errors.New("a render as a GitOps owner (render.Options.Kustomization, Read, PostBuild) is not run in a worker process")
	}
	if kind, err := render.Detect(fsys, dir, o.Render); err != nil || kind == render.Plain {
		return render.Render(ctx, fsys, dir, o)
	}
	lim := o.Limits.WithDefaults()
	warm := d.warm() && s.pool.max > 0
	var w *worker
	if warm {
		w = s.pool.take(d.key())
	}
	if w == nil {
		var err error
		if w, err = s.spawn(s.limits, warm); err != nil {
			return nil, err
		}
	}
	if warm {
		if err := w.prepare(); err != nil {
			w.kill("")
			w.wait()
			w.close()
			return nil, fmt.Errorf("readying a render worker: %w", err)
		}
	}
	stop := w.watch(ctx, lim.Timeout)
	h := &host{ctx: ctx, o: o, lim: lim, trees: []source.FS{fsys}, tracker: source.Track(fsys)}
	res, err := h.serve(w, dir, warm)
	stop()
	switch {
	case err == nil && warm:
		go s.rest(d, w, s.pool.rests(d.key()))
	case err == nil:
		w.wait()
		w.report(nil)
		w.close()
	case h.ownError && warm && w.killedFor() == "":
		// The render's own error (a kustomization that does not build):
		// the worker resets as after any render.
		if w.observe != nil {
			w.notePeak()
		}
		w.observeRender()
		go s.rest(d, w, s.pool.rests(d.key()))
	default:
		if errors.Is(err, errWorkerGone) {
			err = w.died(ctx, lim.Timeout, h.last, fmt.Errorf("%w after %s; raise the limit with %s if this is expected", render.ErrTimeout, lim.Timeout, render.FlagTimeout))
		}
		w.kill("")
		w.wait()
		w.report(err)
		w.close()
	}
	if err != nil {
		return nil, err
	}
	res.Inputs = h.tracker.Inputs()
	return res, nil
}

// host is the side of one render that serves a worker.
type host struct {
	ctx     context.Context
	o       render.Options
	lim     render.Limits
	trees   []source.FS // 0: the source; then the remote bases opened
	tracker *source.Tracker
	read    int64
	listed  int
	// last is the last file the worker read, for when it is killed.
	last string
	// ownError is set when the worker reported the render's own error
	// (not a limit of its own).
	ownError bool
}

func (h *host) serve(w *worker, dir string, warm bool) (*render.Result, error) {
	req := renderRequest{Dir: dir, MemoryBytes: w.limits.Memory, Warm: warm}
	o := h.o
	req.Options = renderOptions{ReleaseName: o.ReleaseName, Capabilities: o.Capabilities, IncludeCRDs: o.IncludeCRDs, Origins: o.Origins, Limits: h.lim, Generate: o.Generate}
	if o.Render != nil {
		req.Options.Render, _ = json.Marshal(o.Render)
	}
	req.Has.Bases, req.Has.Fetch, req.Has.Cluster = o.Bases != nil, o.Fetch != nil, o.Cluster != nil
	req.Has.Charts = o.Charts != nil || o.ChartArchive != nil
	payload, _ := json.Marshal(req)
	if err := writeFrame(w.in, kindRender, payload); err != nil {
		return nil, errWorkerGone
	}
	// The answer is the objects and little else: past the output limit,
	// with room for the rest, is no render's.
	maxFrame := int(min(h.lim.OutputBytes+h.lim.OutputBytes/4+(1<<20), 1<<31-1))
	for {
		k, payload, err := readFrame(w.out, maxFrame)
		if errors.Is(err, errFrameTooLarge) {
			return nil, &render.LimitError{What: "the output", Max: fmt.Sprintf("%d MiB", h.lim.OutputBytes>>20), Flag: render.FlagOutputBytes}
		}
		if err != nil {
			return nil, errWorkerGone
		}
		switch k {
		case kindResult:
			w.answered()
			return h.result(payload)
		case kindFailed:
			return nil, h.failed(w, payload)
		}
		reply, err := h.answer(k, payload)
		rk := kindOK
		if err != nil {
			rk, reply = kindErr, encodeError(err)
		}
		if err := writeFrame(w.in, rk, reply); err != nil {
			return nil, errWorkerGone
		}
	}
}

// failed is a worker's own report of its failure.
func (h *host) failed(w *worker, payload []byte) error {
	var we wireError
	json.Unmarshal(payload, &we)
	switch we.Kind {
	case "cpu":
		return &KilledError{Limit: "CPU", Max: w.limits.CPU.String(), Flag: FlagCPU, Last: h.last}
	case errMemory:
		return &KilledError{Limit: "memory", Max: fmt.Sprintf("%d MiB", w.limits.Memory>>20), Got: we.Msg, Flag: FlagMemory, Last: h.last}
	}
	h.ownError = true
	return decodeError(payload)
}

// result reads a render's answer: its objects, parsed here with the
// checks no render of Sluice's needs (its output is plain YAML).
func (h *host) result(payload []byte) (*render.Result, error) {
	n, k := binary.Uvarint(payload)
	if k <= 0 || uint64(len(payload)-k) < n {
		return nil, errors.New("a malformed result from a render worker")
	}
	var hdr resultHeader
	if err := json.Unmarshal(payload[k:k+int(n)], &hdr); err != nil {
		return nil, fmt.Errorf("a render worker's result: %w", err)
	}
	data := payload[k+int(n):]
	if int64(len(data)) > h.lim.OutputBytes {
		return nil, &render.LimitError{What: "the output", Got: fmt.Sprintf("%d MiB", len(data)>>20), Max: fmt.Sprintf("%d MiB", h.lim.OutputBytes>>20), Flag: render.FlagOutputBytes}
	}
	objs, err := render.DecodeOutput(data, h.lim)
	if err != nil {
		return nil, err
	}
	res := &render.Result{Objects: objs, Origins: hdr.Origins, Remote: hdr.Remote, Generated: hdr.Generated, Lookups: hdr.Lookups, Unkeyed: hdr.Unkeyed, Values: hdr.Values}
	if err := json.Unmarshal(hdr.Renderer, &res.Renderer); err != nil {
		return nil, fmt.Errorf("a render worker's result: %w", err)
	}
	if len(hdr.Chart) > 0 {
		res.Chart = &v1alpha1.PinnedChart{}
		if err := json.Unmarshal(hdr.Chart, res.Chart); err != nil {
			return nil, fmt.Errorf("a render worker's result: %w", err)
		}
	}
	return res, nil
}

// answer serves one call of the worker.
func (h *host) answer(k kind, payload []byte) ([]byte, error) {
	switch k {
	case kindStat, kindLstat, kindReadFile, kindReadDir, kindReadLink, kindHash:
		c, err := decodeFSCall(payload)
		if err != nil {
			return nil, err
		}
		return h.file(k, c)
	case kindBase:
		return h.base(string(payload))
	case kindFetch:
		var c fetchCall
		if err := json.Unmarshal(payload, &c); err != nil {
			return nil, err
		}
		h.last = c.URL
		return h.o.Fetch(egress.WithPolicy(h.ctx, h.o.Egress), c.URL, min(c.Max, h.lim.FileBytes))
	case kindChart:
		return h.chart(payload)
	case kindCaps:
		if h.o.Cluster == nil {
			return nil, errors.New("no cluster to ask")
		}
		caps, err := h.o.Cluster(h.ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(caps)
	}
	return nil, fmt.Errorf("a call of unknown kind %d", k)
}

// file answers a file system call, within the render's limits.
func (h *host) file(k kind, c fsCall) ([]byte, error) {
	if c.fs >= uint64(len(h.trees)) {
		return nil, fmt.Errorf("no tree %d", c.fs)
	}
	if !fs.ValidPath(c.path) {
		return nil, &fs.PathError{Op: "open", Path: c.path, Err: fs.ErrInvalid}
	}
	var fsys source.FS = h.trees[c.fs]
	if c.fs == 0 && c.tracked {
		fsys = h.tracker
	}
	switch k {
	case kindStat:
		info, err := fsys.Stat(c.path)
		if err != nil {
			return nil, err
		}
		return encodeInfo(info), nil
	case kindLstat:
		info, err := fsys.Lstat(c.path)
		if err != nil {
			return nil, err
		}
		return encodeInfo(info), nil
	case kindReadLink:
		target, err := fsys.ReadLink(c.path)
		return []byte(target), err
	case kindHash:
		hash, err := fsys.Hash(c.path)
		return []byte(hash), err
	case kindReadDir:
		entries, err := fsys.ReadDir(c.path)
		if err != nil {
			return nil, err
		}
		if h.listed += len(entries); h.listed > h.lim.Entries {
			return nil, &render.LimitError{What: "the files and folders listed", Got: fmt.Sprintf("%d with %s", h.listed, c.path), Max: fmt.Sprint(h.lim.Entries), Flag: render.FlagEntries}
		}
		out := binary.AppendUvarint(nil, uint64(len(entries)))
		for _, e := range entries {
			out = binary.AppendUvarint(out, uint64(e.Type()|dirBit(e)))
			out = binary.AppendUvarint(out, uint64(len(e.Name())))
			out = append(out, e.Name()...)
		}
		return out, nil
	case kindReadFile:
		info, err := h.trees[c.fs].Stat(c.path)
		if err == nil && !info.IsDir() {
			if info.Size() > h.lim.FileBytes {
				return nil, &render.LimitError{What: "file " + c.path, Got: fmt.Sprintf("%d bytes", info.Size()), Max: fmt.Sprintf("%d bytes per file", h.lim.FileBytes), Flag: render.FlagFileBytes}
			}
			if h.read += info.Size(); h.read > h.lim.ReadBytes {
				return nil, &render.LimitError{What: "the files read", Got: fmt.Sprintf("%d bytes with %s", h.read, c.path), Max: fmt.Sprintf("%d bytes per render", h.lim.ReadBytes), Flag: render.FlagReadBytes}
			}
		}
		if c.fs == 0 {
			h.last = c.path
		}
		return fsys.ReadFile(c.path)
	}
	return nil, fmt.Errorf("a file call of unknown kind %d", k)
}

// dirBit is a listed entry's directory bit (Type holds it already for
// most file systems; a link reported as its folder may not).
func dirBit(e fs.DirEntry) fs.FileMode {
	if e.IsDir() {
		return fs.ModeDir
	}
	return 0
}

// base opens a remote base for the worker, as a tree of its own.
func (h *host) base(url string) ([]byte, error) {
	h.last = url
	b, err := h.o.Bases(egress.WithPolicy(h.ctx, h.o.Egress), url)
	if err != nil {
		return nil, err
	}
	h.trees = append(h.trees, b.FS)
	return json.Marshal(baseReply{FS: uint64(len(h.trees) - 1), Dir: b.Dir, ID: b.ID})
}

// chart fetches a remote chart's archive for the worker (which expands
// it within its own limits).
func (h *host) chart(payload []byte) ([]byte, error) {
	var ref v1alpha1.HelmChart
	if err := json.Unmarshal(payload, &ref); err != nil {
		return nil, err
	}
	h.last = "chart " + ref.Name + " " + ref.Version
	archive := h.o.ChartArchive
	if archive == nil {
		archive = h.o.Charts.Archive
	}
	data, pinned, err := archive(h.ctx, ref)
	if err != nil {
		return nil, err
	}
	p, _ := json.Marshal(pinned)
	out := binary.AppendUvarint(nil, uint64(len(p)))
	return append(append(out, p...), data...), nil
}

// Template executes a text/template (a pull request's title or body) in a
// worker: its output bounded to maxBytes, its time to a few seconds, its
// memory to a quarter of a render's. data is given as the template sees
// a Go value: its exported fields by name.
func (s *Sandbox) Template(ctx context.Context, name, text string, data any, maxBytes int) (string, error) {
	limits := Limits{Memory: min(s.limits.Memory, 256<<20), CPU: 10 * time.Second}
	w, err := s.spawn(limits, false)
	if err != nil {
		return "", err
	}
	defer w.close()
	deadline := limits.CPU
	stop := w.watch(ctx, deadline)
	defer stop()
	payload, err := json.Marshal(templateRequest{Name: name, Text: text, Data: fieldsOf(reflect.ValueOf(data)), MaxBytes: maxBytes, MemoryBytes: limits.Memory})
	if err != nil {
		return "", err
	}
	gone := func() (string, error) {
		err := w.died(ctx, deadline, "", fmt.Errorf("template %s: killed at its time limit of %s", name, deadline))
		var ke *KilledError
		if errors.As(err, &ke) {
			return "", fmt.Errorf("template %s: %w", name, err)
		}
		return "", err
	}
	if err := writeFrame(w.in, kindTemplate, payload); err != nil {
		return gone()
	}
	k, out, err := readFrame(w.out, maxBytes+1)
	if err == nil && k == kindResult {
		w.answered()
	}
	switch {
	case errors.Is(err, errFrameTooLarge):
		w.kill("")
		return "", fmt.Errorf("template %s: output over its limit of %d bytes", name, maxBytes)
	case errors.Is(err, io.EOF), err != nil:
		return gone()
	case k == kindFailed:
		w.wait()
		var we wireError
		json.Unmarshal(out, &we)
		switch we.Kind {
		case "cpu":
			return "", fmt.Errorf("template %s: killed at its CPU limit of %s", name, limits.CPU)
		case errMemory:
			return "", fmt.Errorf("template %s: killed at its memory limit of %d MiB", name, limits.Memory>>20)
		}
		return "", errors.New(we.Msg)
	}
	w.wait()
	return string(out), nil
}

// fieldsOf turns a value into what JSON carries and a template reads the
// same way: structs become maps keyed by their Go field names (a
// template names fields, not JSON keys).
func fieldsOf(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return fieldsOf(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				m[f.Name] = fieldsOf(v.Field(i))
			}
		}
		return m
	case reflect.Slice, reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = fieldsOf(v.Index(i))
		}
		return out
	case reflect.Map:
		m := map[string]any{}
		for _, k := range v.MapKeys() {
			m[fmt.Sprint(k.Interface())] = fieldsOf(v.MapIndex(k))
		}
		return m
	}
	if !v.IsValid() {
		return nil
	}
	return v.Interface()
}
