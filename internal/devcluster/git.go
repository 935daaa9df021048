package devcluster

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// GitHandler serves the bare repositories under root over git's smart HTTP
// protocol, pushes included, through git's own git-http-backend.
func GitHandler(root string) (http.Handler, error) {
	exe, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git --exec-path: %w", err)
	}
	return &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(exe)), "git-http-backend"),
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			// Any REMOTE_USER enables receive-pack: the server listens
			// on loopback only, for this machine's user.
			"REMOTE_USER=sluice-dev",
		},
	}, nil
}

// GitServer is a git server on loopback for a dev cluster: what Flux's
// source-controller reads the repositories of its GitRepositories from
// (it reads http(s) and ssh URLs, not paths). A push to a repository that
// does not exist yet creates it, as forges do.
type GitServer struct {
	// URL is the server's address: a repository NAME is URL/NAME.git.
	URL string
	// Root is the directory holding the bare repositories.
	Root string
	srv  *http.Server
	mu   sync.Mutex // serializes the creation of repositories
}

// repoName is what a pushed-to-create repository may be called: one path
// element, no dot first (nothing outside Root, nothing hidden).
var repoName = regexp.MustCompile(`^/([A-Za-z0-9_][A-Za-z0-9._-]*\.git)/info/refs$`)

// ServeGit starts a git server on loopback over the bare repositories
// under root (created when missing).
func ServeGit(root string) (*GitServer, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	h, err := GitHandler(root)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &GitServer{URL: "http://" + l.Addr().String(), Root: root}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := repoName.FindStringSubmatch(r.URL.Path); m != nil && r.URL.Query().Get("service") == "git-receive-pack" {
			if err := s.create(m[1]); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		h.ServeHTTP(w, r)
	})}
	go s.srv.Serve(l)
	return s, nil
}

// create makes the bare repository name unless it exists.
func (s *GitServer) create(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := filepath.Join(s.Root, name)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if out, err := exec.Command("git", "init", "--quiet", "--bare", "--initial-branch=main", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("creating %s: %v: %s", name, err, out)
	}
	return nil
}

// Close stops the server.
func (s *GitServer) Close() error { return s.srv.Close() }
