package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// SSHGitServer serves the bare repositories of a GitServer over ssh,
// running git's own upload-pack and receive-pack for each session.
type SSHGitServer struct {
	// Addr is host:port.
	Addr string
	// KnownHosts is a known_hosts file naming the server's host key.
	KnownHosts string
	// KeyFile is a private key the server accepts (user "git").
	KeyFile string
}

// NewSSHGitServer serves root (a GitServer's Root) over ssh on loopback.
func NewSSHGitServer(t TB, root string) *SSHGitServer {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatalf("%v", err)
	}
	clientPub, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	clientSSHPub, _ := ssh.NewPublicKey(clientPub)
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if c.User() == "git" && string(key.Marshal()) == string(clientSSHPub.Marshal()) {
				return nil, nil
			}
			return nil, fmt.Errorf("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSSH(conn, cfg, root)
		}
	}()
	dir := t.TempDir()
	s := &SSHGitServer{Addr: ln.Addr().String(), KnownHosts: filepath.Join(dir, "known_hosts"), KeyFile: filepath.Join(dir, "id_ed25519")}
	host, port, _ := net.SplitHostPort(s.Addr)
	line := fmt.Sprintf("[%s]:%s %s", host, port, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))))
	if err := os.WriteFile(s.KnownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := os.WriteFile(s.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	return s
}

// URL is the ssh clone URL of a repository.
func (s *SSHGitServer) URL(name string) string { return "ssh://git@" + s.Addr + "/" + name + ".git" }

func serveSSH(conn net.Conn, cfg *ssh.ServerConfig, root string) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, requests, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range requests {
				if req.Type != "exec" {
					req.Reply(false, nil)
					continue
				}
				var payload struct{ Command string }
				ssh.Unmarshal(req.Payload, &payload)
				prog, arg, _ := strings.Cut(payload.Command, " ")
				if prog != "git-upload-pack" && prog != "git-receive-pack" {
					req.Reply(false, nil)
					return
				}
				req.Reply(true, nil)
				repo := filepath.Join(root, filepath.Clean("/"+strings.Trim(arg, "'")))
				cmd := exec.Command("git", strings.TrimPrefix(prog, "git-"), repo)
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				code := 0
				if err := cmd.Run(); err != nil {
					code = 1
				}
				status := make([]byte, 4)
				binary.BigEndian.PutUint32(status, uint32(code))
				ch.SendRequest("exit-status", false, status)
				return
			}
		}()
	}
}

// SSHAgent is an ssh agent on a unix socket holding one key, counting the
// connections made to it.
type SSHAgent struct {
	// Sock is the socket's path, for SSH_AUTH_SOCK.
	Sock  string
	mu    sync.Mutex
	conns int
}

// NewSSHAgent serves an agent holding the private key in keyFile.
func NewSSHAgent(t TB, keyFile string) *SSHAgent {
	t.Helper()
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("%v", err)
	}
	key, err := ssh.ParseRawPrivateKey(pem)
	if err != nil {
		t.Fatalf("%v", err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatalf("%v", err)
	}
	a := &SSHAgent{Sock: filepath.Join(t.TempDir(), "agent.sock")}
	ln, err := net.Listen("unix", a.Sock)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.conns++
			a.mu.Unlock()
			go func() {
				defer conn.Close()
				agent.ServeAgent(keyring, conn)
			}()
		}
	}()
	return a
}

// Connections is how many times the agent was asked.
func (a *SSHAgent) Connections() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns
}
