package source

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// Auth holds git credentials. Its zero value means anonymous https and
// ssh through the agent, host keys checked against ~/.ssh/known_hosts.
type Auth struct {
	// Username and Password (or a token as Password) for https.
	Username string
	Password string
	// SSHKeyFile is a private key for ssh; without it the ssh agent is used.
	SSHKeyFile       string
	SSHKeyPassphrase string
	// KnownHosts files check ssh host keys; the default is
	// ~/.ssh/known_hosts (and $SSH_KNOWN_HOSTS).
	KnownHosts []string
}

// AuthFromEnv reads credentials from the environment:
// SLUICE_GIT_USERNAME and SLUICE_GIT_PASSWORD, or SLUICE_GIT_TOKEN (sent as
// the password of user SLUICE_GIT_USERNAME, default "x-access-token"), for
// https; SLUICE_SSH_KEY (a key file), SLUICE_SSH_KEY_PASSPHRASE and
// SLUICE_SSH_KNOWN_HOSTS for ssh.
func AuthFromEnv(getenv func(string) string) Auth {
	a := Auth{
		Username:         getenv("SLUICE_GIT_USERNAME"),
		Password:         getenv("SLUICE_GIT_PASSWORD"),
		SSHKeyFile:       getenv("SLUICE_SSH_KEY"),
		SSHKeyPassphrase: getenv("SLUICE_SSH_KEY_PASSPHRASE"),
	}
	if tok := getenv("SLUICE_GIT_TOKEN"); tok != "" {
		a.Password = tok
		if a.Username == "" {
			a.Username = "x-access-token"
		}
	}
	if kh := getenv("SLUICE_SSH_KNOWN_HOSTS"); kh != "" {
		a.KnownHosts = filepath.SplitList(kh)
	}
	return a
}

// method returns the go-git auth method for a remote URL, and the URL
// without userinfo (credentials in the URL win over the environment's).
func (a Auth) method(rawURL string) (transport.AuthMethod, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", err
	}
	switch u.Scheme {
	case "http", "https":
		user, pass := a.Username, a.Password
		if u.User != nil {
			user = u.User.Username()
			pass, _ = u.User.Password()
			u.User = nil
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
		files := a.KnownHosts
		if len(files) == 0 {
			if home, err := os.UserHomeDir(); err == nil {
				files = []string{filepath.Join(home, ".ssh", "known_hosts")}
			}
		}
		hostKeys, err := gitssh.NewKnownHostsCallback(files...)
		if err != nil {
			return nil, "", fmt.Errorf("ssh known hosts: %w", err)
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
