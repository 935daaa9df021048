package source

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"sluice.dev/sluice/internal/backoff"
)

// Auth holds git credentials. Its zero value is anonymous: https without
// credentials, and no ssh at all (ssh needs an identity and the host keys
// to check, given here or, with Ambient, this machine's own).
type Auth struct {
	// Username and Password (or a token as Password) for https. They are
	// sent only to the Hosts, as a git credential helper answers only for
	// the host it was given the credentials of, and never over plain
	// http but to this machine: a repository that names another host (a
	// remote kustomize base, say) does not get them.
	Username string
	Password string
	// Token, if set, makes the password when one is needed, per
	// repository (a GitHub App's installation token, made anew before it
	// expires); sent as Username's, to the Hosts alone.
	Token func(ctx context.Context, repoURL string) (string, error)
	// TokenID names whose tokens Token makes ("github-app/12345"), to
	// keep clones and failures apart: never a secret.
	TokenID string
	// Hosts are where Username and Password are for: a host
	// ("git.example.com", any port), "host:port" (that port), or an
	// origin ("https://git.example.com:443": that scheme, host and port
	// only). A Cache adds the origins of the repositories its caller
	// trusts (Cache.Trust), and a resource's Secret is for the origin of
	// the repository it names it for (Trusting).
	Hosts []string
	// SSHKeyFile is a private key for ssh; without it (or SSHKey) the ssh
	// agent is used.
	SSHKeyFile       string
	SSHKeyPassphrase string
	// SSHKey is a private key for ssh, itself (a Secret's identity).
	SSHKey []byte
	// KnownHosts files check ssh host keys; the default is
	// ~/.ssh/known_hosts (and $SSH_KNOWN_HOSTS).
	KnownHosts []string
	// KnownHostsData, when set, checks ssh host keys instead of files (a
	// Secret's known_hosts).
	KnownHostsData []byte
	// Ambient lets ssh use what this machine's user has: the ssh agent
	// when no key is given, and ~/.ssh/known_hosts when no host keys are.
	// The command line's credentials are a person's and have it
	// (AuthFromEnv); a controller's never do: what a resource names no
	// Secret for gets nothing of the controller's own.
	Ambient bool
}

// AuthFromEnv reads credentials from the environment:
// SLUICE_GIT_USERNAME and SLUICE_GIT_PASSWORD, or SLUICE_GIT_TOKEN (sent as
// the password of user SLUICE_GIT_USERNAME, default "x-access-token"), for
// https, to the hosts in SLUICE_GIT_HOSTS (comma-separated) and those of
// the repositories the run's own files name; SLUICE_SSH_KEY (a key file),
// SLUICE_SSH_KEY_PASSPHRASE and SLUICE_SSH_KNOWN_HOSTS for ssh.
func AuthFromEnv(getenv func(string) string) Auth {
	a := Auth{
		Username:         getenv("SLUICE_GIT_USERNAME"),
		Password:         getenv("SLUICE_GIT_PASSWORD"),
		SSHKeyFile:       getenv("SLUICE_SSH_KEY"),
		SSHKeyPassphrase: getenv("SLUICE_SSH_KEY_PASSPHRASE"),
		Ambient:          true,
	}
	if tok := getenv("SLUICE_GIT_TOKEN"); tok != "" {
		a.Password = tok
		if a.Username == "" {
			a.Username = "x-access-token"
		}
	}
	for _, h := range strings.Split(getenv("SLUICE_GIT_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			a.Hosts = append(a.Hosts, h)
		}
	}
	if kh := getenv("SLUICE_SSH_KNOWN_HOSTS"); kh != "" {
		a.KnownHosts = filepath.SplitList(kh)
	}
	return a
}

// Trusting returns a copy of a that also sends its credentials to the
// origins (scheme, host and port) of these repository URLs (local paths
// have none).
func (a Auth) Trusting(urls ...string) Auth {
	a.Hosts = append([]string(nil), a.Hosts...)
	for _, u := range urls {
		if loc, err := ParseLocation(u, "/"); err == nil && !loc.IsLocal() {
			a.Hosts = append(a.Hosts, loc.Origin())
		}
	}
	return a
}

// HostOf is the host[:port] a repository URL names ("" for a local path).
func HostOf(rawURL string) string {
	loc, err := ParseLocation(rawURL, "/")
	if err != nil || loc.IsLocal() {
		return ""
	}
	u, err := url.Parse(loc.URL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
}

// scoped reports whether credentials for hosts may go to u: its origin,
// or its host (with or without its port), is one of them, and the
// connection is encrypted or stays on this machine.
func scoped(hosts []string, u *url.URL) bool {
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return false
	}
	host, name, origin := strings.ToLower(u.Host), strings.ToLower(u.Hostname()), OriginOf(u.String())
	for _, h := range hosts {
		h = strings.ToLower(h)
		if strings.Contains(h, "://") {
			if h == origin {
				return true
			}
			continue
		}
		if h == host || h == name {
			return true
		}
	}
	return false
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// knownHosts checks host keys against the lines of a known_hosts file's
// content (plain host patterns; hashed entries are not read).
func knownHosts(data []byte) (ssh.HostKeyCallback, error) {
	type entry struct {
		hosts []string
		key   ssh.PublicKey
	}
	var entries []entry
	for rest := data; len(bytes.TrimSpace(rest)) > 0; {
		_, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{hosts, key})
		rest = next
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		host, port, err := net.SplitHostPort(hostname)
		if err != nil {
			host, port = hostname, "22"
		}
		names := []string{host, "[" + host + "]:" + port}
		for _, e := range entries {
			for _, h := range e.hosts {
				if (h == names[0] && port == "22" || h == names[1]) && bytes.Equal(e.key.Marshal(), key.Marshal()) {
					return nil
				}
			}
		}
		return fmt.Errorf("ssh: the host key of %s is not in known_hosts", hostname)
	}, nil
}

// credentials are the Auth a Cache and its repositories share, with the
// hosts trusted so far.
type credentials struct {
	mu   sync.Mutex
	auth Auth
}

func (c *credentials) trust(hosts ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.auth.Hosts = append(c.auth.Hosts, hosts...)
}

// set replaces the Auth: a resource's Secret was rotated.
func (c *credentials) set(a Auth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.auth = a
}

func (c *credentials) method(rawURL string) (transport.AuthMethod, string, error) {
	c.mu.Lock()
	a := c.auth
	c.mu.Unlock()
	return a.method(rawURL)
}

// method returns the go-git auth method for a remote URL, and the URL
// without userinfo. Credentials in the URL itself are for its host alone
// and win over the environment's.
func (a Auth) method(rawURL string) (transport.AuthMethod, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", err
	}
	switch u.Scheme {
	case "http", "https":
		var user, pass string
		if u.User != nil {
			user = u.User.Username()
			pass, _ = u.User.Password()
			u.User = nil
			if u.Scheme == "http" && !loopback(u.Hostname()) {
				return nil, "", fmt.Errorf("%s: credentials over plain http would cross the network unencrypted; use https", Redact(rawURL))
			}
		} else if scoped(a.Hosts, u) {
			user, pass = a.Username, a.Password
			if a.Token != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				tok, err := a.Token(ctx, u.String())
				cancel()
				if err != nil {
					return nil, "", fmt.Errorf("%s: %w", Redact(rawURL), err)
				}
				pass = tok
			}
		}
		if user == "" && pass == "" {
			return nil, u.String(), nil
		}
		if user == "" {
			user = "x-access-token"
		}
		return &githttp.BasicAuth{Username: user, Password: pass}, u.String(), nil
	case "ssh":
		user := "git"
		if u.User != nil {
			user = u.User.Username()
		}
		if a.SSHKey != nil && !a.Ambient && !scoped(a.Hosts, u) {
			return nil, "", fmt.Errorf("%s: the ssh identity given is for %s, not this host", Redact(rawURL), strings.Join(a.Hosts, ", "))
		}
		if a.SSHKey == nil && a.SSHKeyFile == "" && !a.Ambient {
			return nil, "", fmt.Errorf("%s: ssh needs credentials: a Secret with identity and known_hosts (nothing of the controller's own is used)", Redact(rawURL))
		}
		var hostKeys ssh.HostKeyCallback
		files := a.KnownHosts
		switch {
		case a.KnownHostsData != nil:
			if hostKeys, err = knownHosts(a.KnownHostsData); err != nil {
				return nil, "", fmt.Errorf("ssh known_hosts: %w", err)
			}
		case len(files) == 0 && !a.Ambient:
			return nil, "", fmt.Errorf("%s: ssh needs the host keys to check: known_hosts beside the identity", Redact(rawURL))
		default:
			if len(files) == 0 {
				if home, err := os.UserHomeDir(); err == nil {
					files = []string{filepath.Join(home, ".ssh", "known_hosts")}
				}
			}
			if hostKeys, err = gitssh.NewKnownHostsCallback(files...); err != nil {
				return nil, "", fmt.Errorf("ssh known hosts: %w", err)
			}
		}
		if a.SSHKey != nil {
			keys, err := gitssh.NewPublicKeys(user, a.SSHKey, a.SSHKeyPassphrase)
			if err != nil {
				return nil, "", fmt.Errorf("ssh identity: %w", err)
			}
			keys.HostKeyCallback = hostKeys
			return keys, rawURL, nil
		}
		if a.SSHKeyFile != "" {
			keys, err := gitssh.NewPublicKeysFromFile(user, a.SSHKeyFile, a.SSHKeyPassphrase)
			if err != nil {
				return nil, "", fmt.Errorf("ssh key %s: %w", a.SSHKeyFile, err)
			}
			keys.HostKeyCallback = hostKeys
			return keys, rawURL, nil
		}
		agent, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, "", fmt.Errorf("ssh agent (set SLUICE_SSH_KEY to use a key file instead): %w", err)
		}
		agent.HostKeyCallback = hostKeys
		return agent, rawURL, nil
	}
	return nil, rawURL, nil
}

// APICredentials are the user and password (or token) the repository's
// remote is reached with over https, for the forge's API on the same host;
// empty for none (and for ssh remotes).
func (r *Repo) APICredentials() (user, password string) {
	if !r.remote || r.creds == nil {
		return "", ""
	}
	m, _, err := r.creds.method(r.loc.URL)
	if b, ok := m.(*githttp.BasicAuth); ok && err == nil {
		return b.Username, b.Password
	}
	return "", ""
}

// credsKey identifies credentials without keeping them, for the backoff:
// a failure with some credentials does not hold back others.
func credsKey(a Auth) [32]byte {
	return backoff.Key(a.Username, a.Password, a.TokenID, a.SSHKeyFile, a.SSHKeyPassphrase, string(a.SSHKey))
}
