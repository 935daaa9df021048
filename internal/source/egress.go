package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/egress"
)

// WithEgress makes every connection of the Cache's remotes obey p
// (a controller's, for the repositories its tenants name). A connection
// made under a context that carries a policy of its own (a render's, for
// a remote base) obeys that one.
func WithEgress(p *egress.Policy) Option { return func(c *Cache) { c.egress = p } }

// gitTransports installs, once per process, git's http and https
// transports through the policy of each connection's context: go-git
// holds one transport per scheme for the whole process.
var gitTransports sync.Once

func installGitTransports() {
	gitTransports.Do(func() {
		t := githttp.NewClient(&http.Client{Transport: stallTransport{backoff.Transport{Next: egress.ByContext{}}}})
		client.InstallProtocol("https", t)
		client.InstallProtocol("http", t)
	})
}

// connect returns ctx for a connection to the remote, under the policy of
// ctx or else the Cache's, and its stall timeout. ssh and git:// connect
// outside net/http: their host is checked here, before they dial.
func (r *Repo) connect(ctx context.Context) (context.Context, error) {
	if r.stall > 0 {
		ctx = context.WithValue(ctx, stallKey{}, r.stall)
	}
	p := egress.FromContext(ctx)
	if p == nil {
		if p = r.egress; p == nil {
			return ctx, nil
		}
		ctx = egress.WithPolicy(ctx, p)
	}
	u, err := url.Parse(r.loc.URL)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	switch u.Scheme {
	case "ssh":
		if port == "" {
			port = "22"
		}
	case "git":
		if port == "" {
			port = "9418"
		}
	default:
		return ctx, nil
	}
	if err := p.Check(ctx, u.Hostname(), port); err != nil {
		return nil, fmt.Errorf("%s: %w", r.loc, err)
	}
	return ctx, nil
}

// DefaultStallTimeout is how long a git server may send nothing, and
// receive nothing, before its request is given up (see WithStallTimeout).
const DefaultStallTimeout = 2 * time.Minute

// WithStallTimeout bounds how long a git server over http(s) may leave a
// request waiting with no byte sent either way (0: for ever). It is no
// bound on a whole clone: a large one over a slow link goes on as long as
// bytes flow. A server that accepts and then hangs would otherwise hold
// the clone, and every sync reading it, for good.
func WithStallTimeout(d time.Duration) Option { return func(c *Cache) { c.stall = d } }

type stallKey struct{}

// stallTransport gives up a request when no byte has gone either way for
// the stall timeout its context carries.
type stallTransport struct{ next http.RoundTripper }

func (t stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d, _ := req.Context().Value(stallKey{}).(time.Duration)
	if d <= 0 {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &stallWatch{d: d, ctx: ctx, cancel: cancel,
		stalled: fmt.Errorf("%s sent nothing for %s: gave up waiting", req.URL.Host, d)}
	w.timer = time.AfterFunc(d, func() { cancel(w.stalled) })
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &stallBody{ReadCloser: req.Body, w: w}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		w.stop()
		return nil, w.explain(err)
	}
	resp.Body = &stallBody{ReadCloser: resp.Body, w: w, closes: true}
	return resp, nil
}

// stallWatch is one request's stall timer.
type stallWatch struct {
	d       time.Duration
	timer   *time.Timer
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stalled error
}

func (w *stallWatch) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// explain says a request failed for stalling, when it did.
func (w *stallWatch) explain(err error) error {
	if err != nil && !errors.Is(err, io.EOF) && context.Cause(w.ctx) == w.stalled {
		return w.stalled
	}
	return err
}

// stallBody restarts its request's stall timer at each byte read (the
// request's body going out, the response's coming in).
type stallBody struct {
	io.ReadCloser
	w      *stallWatch
	closes bool // the response's: closing it ends the request
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.timer.Reset(b.w.d)
	}
	return n, b.w.explain(err)
}

func (b *stallBody) Close() error {
	if b.closes {
		b.w.stop()
	}
	return b.ReadCloser.Close()
}
