package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"sluice.dev/sluice/internal/anchors"
	"sluice.dev/sluice/internal/source"
)

// Limits bound what one render may read and produce, so that a hostile or
// broken source fails fast instead of filling the machine's memory. A zero
// field takes its default (DefaultLimits).
type Limits struct {
	// FileBytes bounds one file read. Default 32 MiB.
	FileBytes int64 `json:"fileBytes,omitempty"`
	// ReadBytes bounds all the files one render reads. Default 256 MiB.
	ReadBytes int64 `json:"readBytes,omitempty"`
	// OutputBytes bounds the rendered objects together. Default 128 MiB.
	OutputBytes int64 `json:"outputBytes,omitempty"`
	// Objects bounds how many objects one render gives. Default 20,000.
	Objects int `json:"objects,omitempty"`
	// AliasNodes bounds the nodes YAML aliases may add to one file.
	// Default 100,000.
	AliasNodes int `json:"aliasNodes,omitempty"`
	// Entries bounds the files and folders one render lists, in all (a
	// folder of a quarter of a million files is no source). Default
	// 100,000.
	Entries int `json:"entries,omitempty"`
	// Depth bounds how deeply one document nests. Default 100.
	Depth int `json:"depth,omitempty"`
	// Timeout bounds one render's time. Default 5 minutes.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// DefaultLimits are generous for real repositories (kubeflow's largest
// overlay renders about 12 MB in 700 objects) and far below what exhausts
// a machine.
func DefaultLimits() Limits {
	return Limits{
		FileBytes:   32 << 20,
		ReadBytes:   256 << 20,
		OutputBytes: 128 << 20,
		Objects:     20_000,
		AliasNodes:  anchors.DefaultLimit,
		Entries:     100_000,
		Depth:       100,
		Timeout:     5 * time.Minute,
	}
}

// WithDefaults fills the zero fields with DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.FileBytes <= 0 {
		l.FileBytes = d.FileBytes
	}
	if l.ReadBytes <= 0 {
		l.ReadBytes = d.ReadBytes
	}
	if l.OutputBytes <= 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.Objects <= 0 {
		l.Objects = d.Objects
	}
	if l.AliasNodes <= 0 {
		l.AliasNodes = d.AliasNodes
	}
	if l.Entries <= 0 {
		l.Entries = d.Entries
	}
	if l.Depth <= 0 {
		l.Depth = d.Depth
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	return l
}

// Flags that raise each limit, named in errors. The command line and the
// controller take the same names.
const (
	FlagFileBytes   = "--max-file-size"
	FlagReadBytes   = "--max-read-size"
	FlagOutputBytes = "--max-output-size"
	FlagObjects     = "--max-objects"
	FlagAliasNodes  = "--max-alias-nodes"
	FlagEntries     = "--max-entries"
	FlagDepth       = "--max-depth"
	FlagTimeout     = "--render-timeout"
)

// LimitError is a render stopped by one of its Limits.
type LimitError struct {
	// What went over: "file overlays/dev/big.yaml", "the files read".
	What string
	// Got and Max describe the amount and the limit ("40 MiB", "32 MiB").
	Got, Max string
	// Flag raises the limit.
	Flag string
}

func (e *LimitError) Error() string {
	got := ""
	if e.Got != "" {
		got = " (" + e.Got + ")"
	}
	return fmt.Sprintf("%s%s: over the limit of %s; raise it with %s if this is expected", e.What, got, e.Max, e.Flag)
}

// ErrTimeout is what a render past its Limits.Timeout fails with.
var ErrTimeout = errors.New("render timed out")

// bytesString is a size in the units people read.
func bytesString(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// guard is the source tree as a render reads it: every file's size checked
// before it is read, the bytes read counted against the render's budget,
// YAML files' aliases bounded, and the render's context checked, so that a
// cancelled render stops at its next read.
type guard struct {
	source.FS
	// raw is the tree under FS's tracking: sizes are looked up there, so
	// a look that is not a read records nothing.
	raw  source.FS
	ctx  context.Context
	lim  Limits
	read *atomic.Int64
	// listed counts the entries of the folders listed.
	listed *atomic.Int64
}

func newGuard(ctx context.Context, tracked, raw source.FS, lim Limits) *guard {
	return &guard{FS: tracked, raw: raw, ctx: ctx, lim: lim, read: new(atomic.Int64), listed: new(atomic.Int64)}
}

// mount guards another tree with the same budget.
func (g *guard) mount(fsys source.FS) *guard {
	return &guard{FS: fsys, raw: fsys, ctx: g.ctx, lim: g.lim, read: g.read, listed: g.listed}
}

// ReadDir implements fs.ReadDirFS: the entries listed count against the
// render's bound.
func (g *guard) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := g.ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := g.FS.ReadDir(name)
	if err != nil {
		return nil, explainLink(g.raw, name, err)
	}
	if total := g.listed.Add(int64(len(entries))); total > int64(g.lim.Entries) {
		return nil, &LimitError{What: "the files and folders listed", Got: fmt.Sprintf("%d with %s", total, name), Max: fmt.Sprint(g.lim.Entries), Flag: FlagEntries}
	}
	return entries, nil
}

// ReadFile implements fs.ReadFileFS.
func (g *guard) ReadFile(name string) ([]byte, error) {
	if err := g.ctx.Err(); err != nil {
		return nil, err
	}
	info, err := g.raw.Stat(name)
	if err != nil {
		_, err = g.FS.ReadFile(name) // records the absence
		return nil, explainLink(g.raw, name, err)
	}
	if !info.IsDir() {
		if err := g.charge(name, info.Size()); err != nil {
			return nil, err
		}
	}
	data, err := g.FS.ReadFile(name)
	if err != nil {
		return nil, explainLink(g.raw, name, err)
	}
	if err := anchors.Check(data, g.lim.AliasNodes); err != nil {
		return nil, fmt.Errorf("%s: %w; raise the limit with %s if this is expected", name, err, FlagAliasNodes)
	}
	return data, nil
}

// Open implements fs.FS: a file is checked as ReadFile checks it.
func (g *guard) Open(name string) (fs.File, error) {
	if err := g.ctx.Err(); err != nil {
		return nil, err
	}
	// A commit's file is read whole when opened: its size is checked
	// before.
	if info, err := g.raw.Stat(name); err == nil && !info.IsDir() {
		if err := g.charge(name, info.Size()); err != nil {
			return nil, err
		}
	}
	f, err := g.FS.Open(name)
	if err != nil {
		return nil, explainLink(g.raw, name, err)
	}
	return f, nil
}

// Stat implements fs.StatFS.
func (g *guard) Stat(name string) (fs.FileInfo, error) {
	info, err := g.FS.Stat(name)
	if err != nil {
		return nil, explainLink(g.raw, name, err)
	}
	return info, nil
}

// explainLink turns the failure to read a path that passes through a
// symbolic link out of the tree, or to nowhere in it, into an error that
// names the link and where it points.
func explainLink(fsys source.FS, name string, err error) error {
	res, rerr := source.Resolve(fsys, name)
	var le *source.LinkError
	switch {
	case errors.As(rerr, &le):
		return le
	case rerr != nil && res.Linked() && errors.Is(rerr, fs.ErrNotExist):
		return &source.LinkError{Name: name, Link: res.Link, Target: res.Target, Msg: "is not in the source"}
	}
	return err
}

// charge counts a file of size bytes against the limits.
func (g *guard) charge(name string, size int64) error {
	if size > g.lim.FileBytes {
		return &LimitError{What: "file " + name, Got: bytesString(size), Max: bytesString(g.lim.FileBytes) + " per file", Flag: FlagFileBytes}
	}
	if total := g.read.Add(size); total > g.lim.ReadBytes {
		return &LimitError{What: "the files read", Got: bytesString(total) + " with " + name, Max: bytesString(g.lim.ReadBytes) + " per render", Flag: FlagReadBytes}
	}
	return nil
}

// checkOutput bounds what a render produced.
func (l Limits) checkOutput(objects int, size int64) error {
	if objects > l.Objects {
		return &LimitError{What: "the objects rendered", Got: fmt.Sprint(objects), Max: fmt.Sprint(l.Objects), Flag: FlagObjects}
	}
	if size > l.OutputBytes {
		return &LimitError{What: "the output", Got: bytesString(size), Max: bytesString(l.OutputBytes), Flag: FlagOutputBytes}
	}
	return nil
}
