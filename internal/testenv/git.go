package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sluice.dev/sluice/internal/devcluster"
)

// GitServer serves the bare repositories under a directory over smart
// HTTP, pushes included, through git-http-backend.
type GitServer struct {
	// Root is the directory holding the bare repositories.
	Root string
	srv  *httptest.Server
	// Requests counts the HTTP requests received, Served those answered.
	Requests atomic.Int64
	Served   atomic.Int64
	auth     atomic.Pointer[[2]string] // user and password required, if set
	hook     func(*http.Request)
	fail     atomic.Pointer[func(*http.Request) int]
	cut      atomic.Pointer[func(*http.Request) int64]
	delay    atomic.Pointer[func(*http.Request) time.Duration]
	// retryAfter is the Retry-After (seconds) of FailWith's answers.
	retryAfter atomic.Int64
}

// RetryAfter makes FailWith's answers say Retry-After: seconds (0: none).
func (s *GitServer) RetryAfter(seconds int) { s.retryAfter.Store(int64(seconds)) }

// FailWith makes the server answer with the status f returns (0: serve
// normally), as a git server that is down or overloaded would; nil
// restores normal service.
func (s *GitServer) FailWith(f func(*http.Request) int) {
	if f == nil {
		s.fail.Store(nil)
		return
	}
	s.fail.Store(&f)
}

// CutAfter makes the server drop the connection (a TCP reset) after the
// first n bytes of a response, n as f returns (negative: serve it all),
// as a proxy or a server dying halfway through a pack does; nil restores
// normal service.
func (s *GitServer) CutAfter(f func(*http.Request) int64) {
	if f == nil {
		s.cut.Store(nil)
		return
	}
	s.cut.Store(&f)
}

// Delay makes the server wait before answering a request, as long as f
// returns (0: at once), as a slow or overloaded server does; a client
// that gives up meanwhile is answered nothing. nil restores normal
// service.
func (s *GitServer) Delay(f func(*http.Request) time.Duration) {
	if f == nil {
		s.delay.Store(nil)
		return
	}
	s.delay.Store(&f)
}

// SetBasicAuth changes the credentials the server requires (as when a
// token is revoked or rotated); empty ones require none.
func (s *GitServer) SetBasicAuth(user, password string) {
	if user == "" {
		s.auth.Store(nil)
		return
	}
	s.auth.Store(&[2]string{user, password})
}

// GitServerOption configures a GitServer.
type GitServerOption func(*GitServer)

// WithBasicAuth makes the server require these credentials.
func WithBasicAuth(user, password string) GitServerOption {
	return func(s *GitServer) { s.SetBasicAuth(user, password) }
}

// TB is the part of testing.TB the helpers need, so that the benchmark
// program can use them outside `go test`.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

var _ TB = (testing.TB)(nil)

// WithHook calls f before serving each request (to push concurrently in
// the middle of a client's push, say).
func WithHook(f func(*http.Request)) GitServerOption {
	return func(s *GitServer) { s.hook = f }
}

// NewGitServer starts a git server; it stops when the test ends.
func NewGitServer(t TB, opts ...GitServerOption) *GitServer {
	t.Helper()
	s := &GitServer{Root: t.TempDir()}
	for _, o := range opts {
		o(s)
	}
	h, err := devcluster.GitHandler(s.Root)
	if err != nil {
		t.Fatalf("%v", err)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Requests.Add(1)
		defer s.Served.Add(1)
		if s.hook != nil {
			s.hook(r)
		}
		if f := s.delay.Load(); f != nil {
			select {
			case <-time.After((*f)(r)):
			case <-r.Context().Done():
				return
			}
		}
		if f := s.cut.Load(); f != nil {
			if n := (*f)(r); n >= 0 {
				w = &cutWriter{ResponseWriter: w, left: n}
			}
		}
		if f := s.fail.Load(); f != nil {
			if code := (*f)(r); code != 0 {
				if ra := s.retryAfter.Load(); ra > 0 {
					w.Header().Set("Retry-After", strconv.FormatInt(ra, 10))
				}
				http.Error(w, http.StatusText(code), code)
				return
			}
		}
		if a := s.auth.Load(); a != nil {
			u, p, ok := r.BasicAuth()
			if !ok || u != a[0] || p != a[1] {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// cutWriter passes left bytes of a response, then resets the connection.
type cutWriter struct {
	http.ResponseWriter
	left int64
	cut  bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.cut {
		return 0, net.ErrClosed
	}
	if int64(len(p)) <= c.left {
		c.left -= int64(len(p))
		return c.ResponseWriter.Write(p)
	}
	n, _ := c.ResponseWriter.Write(p[:c.left])
	c.cut = true
	http.NewResponseController(c.ResponseWriter).Flush()
	if conn, _, err := http.NewResponseController(c.ResponseWriter).Hijack(); err == nil {
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not an orderly close
		}
		conn.Close()
	}
	return n, net.ErrClosed
}

// URL is the clone URL of a repository on the server.
func (s *GitServer) URL(name string) string { return s.srv.URL + "/" + name + ".git" }

// CreateRepo makes an empty bare repository and returns its URL.
func (s *GitServer) CreateRepo(t TB, name string) string {
	t.Helper()
	dir := filepath.Join(s.Root, name+".git")
	Git(t, "", "init", "--bare", "--initial-branch=main", dir)
	return s.URL(name)
}

// Git runs git in dir with a fixed identity and returns its output.
func Git(t TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir(),
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Work is a working clone used to author commits in tests.
type Work struct {
	Dir string
	t   TB
}

// NewWork makes a new repository with a main branch in a temporary
// directory; with a remote URL it is set as origin.
func NewWork(t TB, remote string) *Work {
	t.Helper()
	w := &Work{Dir: t.TempDir(), t: t}
	Git(t, w.Dir, "init", "--initial-branch=main")
	if remote != "" {
		Git(t, w.Dir, "remote", "add", "origin", remote)
	}
	return w
}

// Write writes files (path → content); an empty content removes the file.
func (w *Work) Write(files map[string]string) *Work {
	w.t.Helper()
	for name, content := range files {
		p := filepath.Join(w.Dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.RemoveAll(p); err != nil {
				w.t.Fatalf("%v", err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatalf("%v", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			w.t.Fatalf("%v", err)
		}
	}
	return w
}

// Link makes symbolic links (path → target, written into the link as
// given: relative, absolute, or leading anywhere).
func (w *Work) Link(links map[string]string) *Work {
	w.t.Helper()
	for name, target := range links {
		p := filepath.Join(w.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatalf("%v", err)
		}
		os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			w.t.Fatalf("%v", err)
		}
	}
	return w
}

// Commit commits everything and returns the commit SHA.
func (w *Work) Commit(msg string) string {
	w.t.Helper()
	Git(w.t, w.Dir, "add", "-A")
	Git(w.t, w.Dir, "commit", "--allow-empty", "-q", "-m", msg)
	return w.Head()
}

// Head returns the SHA of HEAD.
func (w *Work) Head() string {
	w.t.Helper()
	return Git(w.t, w.Dir, "rev-parse", "HEAD")
}

// Push pushes refs (default: the current branch) to origin.
func (w *Work) Push(refs ...string) {
	w.t.Helper()
	if len(refs) == 0 {
		refs = []string{"HEAD"}
	}
	// A big buffer: the test server (CGI) cannot take chunked requests.
	Git(w.t, w.Dir, append([]string{"-c", "http.postBuffer=1073741824", "push", "-q", "origin"}, refs...)...)
}

// Show returns a file's content at a revision of a repository (a bare one
// or a work tree).
func Show(t TB, repoDir, rev, path string) string {
	t.Helper()
	return Git(t, repoDir, "show", fmt.Sprintf("%s:%s", rev, path))
}
