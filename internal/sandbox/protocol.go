package sandbox

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// A frame is one message between the host (the process that starts a
// worker) and the worker: the length of what follows (4 bytes, big
// endian), the frame's kind (1 byte), and its payload.
type kind byte

// Kinds of frames. The host sends a request, then answers each of the
// worker's calls (ok or err) until the worker sends its result or
// failure.
const (
	kindRender   kind = 1  // host: renderRequest (JSON)
	kindTemplate kind = 2  // host: templateRequest (JSON)
	kindOK       kind = 3  // host: a call's answer
	kindErr      kind = 4  // host: a call's failure (wireError)
	kindStat     kind = 10 // worker: fs calls, fsCall encoded
	kindLstat    kind = 11
	kindReadFile kind = 12
	kindReadDir  kind = 13
	kindReadLink kind = 14
	kindHash     kind = 15
	kindBase     kind = 20 // worker: a remote base's URL
	kindFetch    kind = 21 // worker: fetchCall (JSON)
	kindChart    kind = 22 // worker: v1alpha1.HelmChart (JSON)
	kindCaps     kind = 23 // worker: the cluster's capabilities
	kindResult   kind = 30 // worker: header length (uvarint), resultHeader (JSON), the objects' YAML
	kindFailed   kind = 31 // worker: wireError
	kindReady    kind = 32 // worker: a warm worker, reset and checked, takes another request
)

// writeFrame writes one frame and flushes it.
func writeFrame(w *bufio.Writer, k kind, payload []byte) error {
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(payload)+1))
	hdr[4] = byte(k)
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(payload); err != nil {
		return err
	}
	return w.Flush()
}

// errFrameTooLarge is a frame past what its reader takes.
var errFrameTooLarge = errors.New("a message larger than allowed")

// readFrame reads one frame of at most max bytes.
func readFrame(r io.Reader, max int) (kind, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:4]))
	if n < 1 {
		return 0, nil, errors.New("an empty frame")
	}
	if n-1 > max {
		return 0, nil, fmt.Errorf("%w (%d bytes, at most %d)", errFrameTooLarge, n-1, max)
	}
	payload := make([]byte, n-1)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return kind(hdr[4]), payload, nil
}

// renderRequest asks a worker for one render.
type renderRequest struct {
	Dir string `json:"dir"`
	// Options are what render.Options holds that crosses a process:
	// settings, not functions. The functions (bases, fetches, charts, the
	// cluster) are calls back to the host, offered where Has says.
	Options renderOptions `json:"options"`
	Has     struct {
		Bases, Fetch, Charts, Cluster bool
	} `json:"has"`
	// MemoryBytes is the worker's memory limit, for its own watch.
	MemoryBytes int64 `json:"memoryBytes"`
	// Warm asks the worker to stay for another render of the same trust
	// domain once it has reset and checked its state (kindReady).
	Warm bool `json:"warm,omitempty"`
}

type renderOptions struct {
	Render       json.RawMessage     `json:"render,omitempty"`
	ReleaseName  string              `json:"releaseName,omitempty"`
	Capabilities render.Capabilities `json:"capabilities"`
	IncludeCRDs  bool                `json:"includeCRDs,omitempty"`
	Origins      bool                `json:"origins,omitempty"`
	Limits       render.Limits       `json:"limits"`
	// Generate carries the sync's own key (derived for it, never the
	// run's): the worker makes the values templates generate.
	Generate *render.Generate `json:"generate,omitempty"`
}

// templateRequest asks a worker to execute a text/template.
type templateRequest struct {
	Name string `json:"name"`
	Text string `json:"text"`
	// Data is what the template is given, as maps and lists whose keys
	// are the Go field names the template names.
	Data        any   `json:"data"`
	MaxBytes    int   `json:"maxBytes"`
	MemoryBytes int64 `json:"memoryBytes"`
}

// resultHeader is what a render gave besides its objects.
type resultHeader struct {
	Renderer json.RawMessage `json:"renderer"`
	Origins  []string        `json:"origins,omitempty"`
	Chart    json.RawMessage `json:"chart,omitempty"`
	Remote   []string        `json:"remote,omitempty"`
	Objects  int             `json:"objects"`
	// Generated, Lookups and Unkeyed are Result's.
	Generated []v1alpha1.Generated `json:"generated,omitempty"`
	Lookups   []string             `json:"lookups,omitempty"`
	Unkeyed   []string             `json:"unkeyed,omitempty"`
	// Values are Result's secret values: over the pipe between the two
	// processes only.
	Values []mask.Value `json:"values,omitempty"`
}

// baseReply is a remote base as the host opened it.
type baseReply struct {
	FS  uint64 `json:"fs"`
	Dir string `json:"dir"`
	ID  string `json:"id"`
}

type fetchCall struct {
	URL string `json:"url"`
	Max int64  `json:"max"`
}

// fsCall is a file system call: which tree (0: the source; a remote
// base's number), whether the host records it as read (the render reads
// it) or not (its size or link is only looked at), and the path.
type fsCall struct {
	fs      uint64
	tracked bool
	path    string
}

func (c fsCall) encode() []byte {
	b := binary.AppendUvarint(nil, c.fs)
	if c.tracked {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, c.path...)
}

func decodeFSCall(b []byte) (fsCall, error) {
	id, n := binary.Uvarint(b)
	if n <= 0 || len(b) < n+1 {
		return fsCall{}, errors.New("a malformed file call")
	}
	return fsCall{fs: id, tracked: b[n] == 1, path: string(b[n+1:])}, nil
}

// wireError is an error that crosses the process boundary with what its
// readers test it for: a missing file, a link out of the tree, a limit.
type wireError struct {
	Kind  string             `json:"kind,omitempty"`
	Msg   string             `json:"msg"`
	Op    string             `json:"op,omitempty"`
	Path  string             `json:"path,omitempty"`
	Link  *source.LinkError  `json:"link,omitempty"`
	Limit *render.LimitError `json:"limit,omitempty"`
}

// Kinds of wire errors.
const (
	errNotExist = "notexist"
	errLink     = "link"
	errLimit    = "limit"
	errTimeout  = "timeout"
	errCanceled = "canceled"
	errMemory   = "memory"
)

func encodeError(err error) []byte {
	w := wireError{Msg: err.Error()}
	var le *source.LinkError
	var lim *render.LimitError
	var pe *fs.PathError
	switch {
	case errors.As(err, &le):
		w.Kind, w.Link = errLink, le
	case errors.As(err, &lim):
		w.Kind, w.Limit = errLimit, lim
	case errors.Is(err, render.ErrTimeout):
		w.Kind = errTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		w.Kind = errCanceled
	case errors.Is(err, fs.ErrNotExist):
		w.Kind = errNotExist
		if errors.As(err, &pe) {
			w.Op, w.Path = pe.Op, pe.Path
		}
	}
	data, _ := json.Marshal(w)
	return data
}

// decodeError rebuilds an error of the kinds callers test for. The
// message is the worker's own words: the errors only it could see.
func decodeError(data []byte) error {
	var w wireError
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("an unreadable error from a render worker: %w", err)
	}
	switch w.Kind {
	case errLink:
		if w.Link != nil {
			return wrapped{w.Msg, w.Link}
		}
	case errLimit:
		if w.Limit != nil {
			return wrapped{w.Msg, w.Limit}
		}
	case errTimeout:
		return wrapped{w.Msg, render.ErrTimeout}
	case errCanceled:
		return wrapped{w.Msg, context.Canceled}
	case errNotExist:
		if w.Path != "" {
			return &fs.PathError{Op: w.Op, Path: w.Path, Err: fs.ErrNotExist}
		}
		return wrapped{w.Msg, fs.ErrNotExist}
	}
	return errors.New(w.Msg)
}

// wrapped is an error of one message that tests as another.
type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }
