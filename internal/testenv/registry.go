package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an OCI registry on loopback.
type Registry struct {
	// Host is host:port, to prefix repositories with.
	Host string
	srv  *httptest.Server
	// Requests counts the HTTP requests served.
	Requests atomic.Int64
	// Uploads counts the blob uploads started (layers and configs pushed;
	// a blob the registry has is not uploaded); UploadedBytes sums their
	// bodies.
	Uploads       atomic.Int64
	UploadedBytes atomic.Int64
	// bandwidth, when set, limits uploads to that many bytes per second,
	// as a registry reached over a network would.
	bandwidth atomic.Int64
	// Fail, when set, answers requests whose path contains its key with the
	// status code it maps to (to test retries and errors).
	fail       atomic.Pointer[func(*http.Request) int]
	retryAfter atomic.Int64
	// auth, when set, is the user:password every request must carry.
	auth atomic.Pointer[string]
	// refused, when set, is a media type manifests may not name.
	refused atomic.Pointer[string]
}

// RefuseMediaType makes the registry refuse a manifest that names
// mediaType (as its config's, a layer's or its own), answering as the
// distribution spec has a registry refuse a manifest it does not accept:
// 400 with the error code MANIFEST_INVALID.
// "" accepts every media type again.
func (r *Registry) RefuseMediaType(mediaType string) {
	if mediaType == "" {
		r.refused.Store(nil)
		return
	}
	r.refused.Store(&mediaType)
}

// RequireAuth makes the registry answer every request without these
// credentials (HTTP basic) 401, as a private registry with htpasswd
// authentication (Distribution's) does.
func (r *Registry) RequireAuth(user, password string) {
	s := user + ":" + password
	r.auth.Store(&s)
}

// NewRegistry starts a registry; it stops when the test ends. It has no
// referrers API: clients keep the referrers tag (sha256-<hex>).
func NewRegistry(t TB) *Registry { return newRegistry(t, false) }

// NewRegistryWithReferrers starts a registry with the OCI 1.1 referrers
// API, answering as go-containerregistry's registry does (and some
// registries did before OCI 1.1 settled): a referrer's artifactType is
// its config's media type, not the manifest's own artifactType.
func NewRegistryWithReferrers(t TB) *Registry { return newRegistry(t, true) }

func newRegistry(t TB, referrers bool) *Registry {
	t.Helper()
	r := &Registry{}
	h := registry.New(registry.Logger(nopLogger()), registry.WithReferrersSupport(referrers))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.Requests.Add(1)
		if strings.Contains(req.URL.Path, "/blobs/uploads/") {
			if req.Method == http.MethodPost {
				r.Uploads.Add(1)
			}
			if req.Method == http.MethodPatch || req.Method == http.MethodPut {
				req.Body = &countingBody{ReadCloser: req.Body, n: &r.UploadedBytes, bps: r.bandwidth.Load(), start: time.Now()}
			}
		}
		if want := r.auth.Load(); want != nil {
			u, p, ok := req.BasicAuth()
			if !ok || u+":"+p != *want {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		if mt := r.refused.Load(); mt != nil && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/") {
			body, _ := io.ReadAll(io.LimitReader(req.Body, 4<<20))
			if strings.Contains(string(body), `"`+*mt+`"`) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"errors":[{"code":"MANIFEST_INVALID","message":"manifest invalid","detail":"unsupported media type %s"}]}`, *mt)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if f := r.fail.Load(); f != nil {
			if code := (*f)(req); code != 0 {
				if code == http.StatusTooManyRequests {
					ra := max(r.retryAfter.Load(), 1)
					w.Header().Set("Retry-After", strconv.FormatInt(ra, 10)) // as registries say when to come back
				}
				http.Error(w, http.StatusText(code), code)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// RetryAfter sets the Retry-After (seconds) of FailWith's 429s; the
// default is 1.
func (r *Registry) RetryAfter(seconds int) { r.retryAfter.Store(int64(seconds)) }

// FailWith makes the registry answer with the status f returns (0: serve
// normally); nil restores normal service.
func (r *Registry) FailWith(f func(*http.Request) int) {
	if f == nil {
		r.fail.Store(nil)
		return
	}
	r.fail.Store(&f)
}

// Push pushes a small random image under repo:tag (repo without host) and
// returns its digest.
func (r *Registry) Push(t TB, repoTag string) string {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatalf("random image: %v", err)
	}
	return r.PushImage(t, repoTag, img)
}

// PushImage pushes img under repo:tag (repo without host) and returns its
// digest.
func (r *Registry) PushImage(t TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d.String()
}

// Delete removes repo:tag (repo without host), as a registry's retention
// policy or a person does.
func (r *Registry) Delete(t TB, repoTag string) {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Delete(ref); err != nil {
		t.Fatalf("deleting %s: %v", ref, err)
	}
}

// Tag points repo:tag at an existing digest (repo without host).
func (r *Registry) Tag(t TB, repo, digest, tag string) {
	t.Helper()
	src, err := name.ParseReference(r.Host + "/" + repo + "@" + digest)
	if err != nil {
		t.Fatalf("%v", err)
	}
	desc, err := remote.Get(src)
	if err != nil {
		t.Fatalf("getting %s: %v", src, err)
	}
	if err := remote.Tag(src.Context().Tag(tag), desc); err != nil {
		t.Fatalf("tagging %s: %v", tag, err)
	}
}

// PushIndex pushes a multi-platform index under repo:tag (repo without
// host) and returns its digest.
func (r *Registry) PushIndex(t TB, repoTag string, idx v1.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d.String()
}

// Throttle limits uploads to bytesPerSecond (0: no limit).
func (r *Registry) Throttle(bytesPerSecond int64) { r.bandwidth.Store(bytesPerSecond) }

// countingBody counts the bytes read through it and, with bps set, reads
// no faster than that.
type countingBody struct {
	io.ReadCloser
	n     *atomic.Int64
	bps   int64
	start time.Time
	read  int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	if c.bps > 0 && len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	c.read += int64(n)
	if c.bps > 0 {
		due := c.start.Add(time.Duration(float64(c.read) / float64(c.bps) * float64(time.Second)))
		time.Sleep(time.Until(due))
	}
	return n, err
}
