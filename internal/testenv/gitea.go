package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sluice.dev/sluice/internal/devcluster"
)

// Gitea is a real forge (Gitea, built by `make tools` from the module
// proxy) on loopback: repositories over smart HTTP, and webhooks it
// delivers itself.
type Gitea struct {
	// URL is the server's root ("http://127.0.0.1:PORT/").
	URL            string
	User, Password string
	cmd            *exec.Cmd
	dir            string
}

// GiteaBinary returns the gitea `make tools` builds (hack/gitea/build.sh).
func GiteaBinary(t TB) string {
	t.Helper()
	return versionedTool(t, "gitea")
}

// StartGitea starts a Gitea with an admin user; it stops when the test
// ends.
func StartGitea(t TB) *Gitea {
	t.Helper()
	return StartGiteaWith(t, "")
}

// StartGiteaWith starts a Gitea with more of app.ini's settings (whole
// sections, after the test's own).
func StartGiteaWith(t TB, ini string) *Gitea {
	t.Helper()
	bin := GiteaBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	g := &Gitea{URL: fmt.Sprintf("http://127.0.0.1:%d/", port), User: "sluice", Password: "Sluice-test-1", dir: t.TempDir()}
	conf := fmt.Sprintf(`APP_NAME = sluice-test
RUN_MODE = prod
WORK_PATH = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true
[database]
DB_TYPE = sqlite3
PATH = %[1]s/gitea.db
[repository]
ROOT = %[1]s/repos
DEFAULT_BRANCH = main
[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[2]d
ROOT_URL = %[3]s
STATIC_ROOT_PATH = %[4]s
DISABLE_SSH = true
OFFLINE_MODE = true
LFS_START_SERVER = false
[security]
INSTALL_LOCK = true
SECRET_KEY = sluice-test-secret-key-0123456789
ALLOWED_HOST_LIST = loopback
[service]
DISABLE_REGISTRATION = true
[indexer]
ISSUE_INDEXER_TYPE = db
[cron]
ENABLED = false
[log]
LEVEL = Warn
`, g.dir, port, g.URL, filepath.Join(filepath.Dir(bin), "src")) + ini
	file := filepath.Join(g.dir, "app.ini")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	run := func(args ...string) {
		out, err := exec.Command(bin, append([]string{"--config", file}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("gitea %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("migrate")
	run("admin", "user", "create", "--admin", "--username", g.User, "--password", g.Password, "--email", "sluice@example.com", "--must-change-password=false")
	log, err := os.Create(filepath.Join(g.dir, "web.log"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	g.cmd = exec.Command(bin, "--config", file, "web")
	g.cmd.Stdout, g.cmd.Stderr = log, log
	devcluster.DieWithParent(g.cmd)
	if err := g.cmd.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		g.cmd.Process.Kill()
		g.cmd.Wait()
		log.Close()
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(g.URL + "api/v1/version"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(log.Name())
			t.Fatalf("gitea did not start:\n%s", data)
		}
	}
	return g
}

// API calls Gitea's API as the admin user, decoding the answer into out
// (if set).
func (g *Gitea) API(t TB, method, path string, body, out any) {
	t.Helper()
	var b bytes.Buffer
	if body != nil {
		json.NewEncoder(&b).Encode(body)
	}
	req, err := http.NewRequest(method, g.URL+"api/v1/"+path, &b)
	if err != nil {
		t.Fatalf("%v", err)
	}
	req.SetBasicAuth(g.User, g.Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("gitea %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var data bytes.Buffer
	data.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("gitea %s %s: %s\n%s", method, path, resp.Status, data.String())
	}
	if out != nil {
		if err := json.Unmarshal(data.Bytes(), out); err != nil {
			t.Fatalf("gitea %s %s: %v", method, path, err)
		}
	}
}

// CreateRepo creates an empty public repository of the admin user and
// returns its clone URL.
func (g *Gitea) CreateRepo(t TB, name string) string {
	t.Helper()
	var repo struct {
		CloneURL string `json:"clone_url"`
	}
	g.API(t, http.MethodPost, "user/repos", map[string]any{"name": name, "default_branch": "main"}, &repo)
	return repo.CloneURL
}

// PushURL is a clone URL with the admin's credentials, to push with.
func (g *Gitea) PushURL(cloneURL string) string {
	return strings.Replace(cloneURL, "http://", "http://"+g.User+":"+g.Password+"@", 1)
}

// AddWebhook makes Gitea send push events of a repository to url, signed
// with secret, as a Gitea webhook ("gitea") or a Gogs one ("gogs").
func (g *Gitea) AddWebhook(t TB, repo, kind, url, secret string) {
	t.Helper()
	g.API(t, http.MethodPost, "repos/"+g.User+"/"+repo+"/hooks", map[string]any{
		"type": kind, "active": true, "events": []string{"push"},
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, nil)
}

// Merge merges a pull request as a reviewer would, once Gitea has checked
// that it can (it does so in the background after each push).
func (g *Gitea) Merge(t TB, repo string, number int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%sapi/v1/repos/%s/%s/pulls/%d/merge", g.URL, g.User, repo, number), strings.NewReader(`{"Do":"merge"}`))
		if err != nil {
			t.Fatalf("%v", err)
		}
		req.SetBasicAuth(g.User, g.Password)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("merging #%d: %v", number, err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("merging #%d: %s %s", number, resp.Status, body.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Head is the commit a branch of a repository points at, as git sees it.
func (g *Gitea) Head(t TB, cloneURL, branch string) string {
	t.Helper()
	out := Git(t, "", "ls-remote", cloneURL, "refs/heads/"+branch)
	sha, _, _ := strings.Cut(out, "\t")
	return sha
}

// CreateUser makes a user of the forge (by the admin), who may then fork
// and open pull requests of their own.
func (g *Gitea) CreateUser(t TB, name, password string) {
	t.Helper()
	g.API(t, http.MethodPost, "admin/users", map[string]any{"username": name, "email": name + "@example.com", "password": password, "must_change_password": false}, nil)
}

// APIAs calls Gitea's API as user, decoding the answer into out (if set).
func (g *Gitea) APIAs(user, password, method, path string, body, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, g.URL+"api/v1/"+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("gitea %s %s as %s: %s", method, path, user, resp.Status)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// OpenPullRequest opens a pull request on the admin's repository repo as
// user, from head ("branch", or "owner:branch" of a fork) to base, and
// returns its number. Gitea answers 404 for a moment after a branch's
// first push: it is tried again for a while.
func (g *Gitea) OpenPullRequest(t TB, user, password, repo, head, base, title string) int {
	t.Helper()
	var pr struct {
		Number int `json:"number"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := g.APIAs(user, password, http.MethodPost, "repos/"+g.User+"/"+repo+"/pulls", map[string]any{"head": head, "base": base, "title": title}, &pr)
		if err == nil {
			return pr.Number
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Fork forks the admin's repository repo as user and returns the fork's
// clone URL, with the user's credentials in it (to push with).
func (g *Gitea) Fork(t TB, user, password, repo string) string {
	t.Helper()
	var fork struct {
		CloneURL string `json:"clone_url"`
	}
	if err := g.APIAs(user, password, http.MethodPost, "repos/"+g.User+"/"+repo+"/forks", map[string]any{}, &fork); err != nil {
		t.Fatalf("%v", err)
	}
	return strings.Replace(fork.CloneURL, "http://", "http://"+user+":"+password+"@", 1)
}
