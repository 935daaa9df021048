package testenv

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Vault is HashiCorp Vault's dev server (built by `make tools`,
// hack/vault/build.sh) running for one test, with a transit engine
// mounted at "sops" (where SOPS's --hc-vault-transit keys live).
type Vault struct {
	// Addr is its URL (VAULT_ADDR), RootToken a token that may do
	// anything.
	Addr, RootToken string
}

// VaultBinary returns the path of the Vault `make tools` builds.
func VaultBinary(t TB) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "vault", "build.sh"), "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("%s", strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out))
}

// StartVault starts a dev server (in memory, unsealed) on a free
// loopback port with the transit engine mounted at "sops"; it stops
// when the test ends. A port taken before Vault binds it is tried again.
func StartVault(t TB) *Vault {
	t.Helper()
	bin := VaultBinary(t)
	home := t.TempDir()
	v := &Vault{RootToken: "sluice-test-root"}
	log := filepath.Join(home, "vault.log")
	err := launch(t, log, home, append(os.Environ(), "HOME="+home, "VAULT_ADDR=", "VAULT_TOKEN="), func() ([]string, []string) {
		addr := freeAddr(t)
		v.Addr = "http://" + addr
		return []string{bin, "server", "-dev", "-dev-root-token-id=" + v.RootToken, "-dev-listen-address=" + addr, "-dev-no-store-token"},
			[]string{v.Addr + "/v1/sys/health"}
	}, "")
	if err != nil {
		data, _ := os.ReadFile(log)
		t.Fatalf("Vault did not start: %v\n%s", err, data)
	}
	v.do(t, "POST", "/v1/sys/mounts/sops", v.RootToken, map[string]any{"type": "transit"}, nil)
	return v
}

// TransitKey creates a transit key and returns what SOPS's
// --hc-vault-transit takes: its URL.
func (v *Vault) TransitKey(t TB, name string) string {
	t.Helper()
	v.do(t, "POST", "/v1/sops/keys/"+name, v.RootToken, map[string]any{}, nil)
	return v.Addr + "/v1/sops/keys/" + name
}

// Token creates a token whose only rights are those of policy (Vault's
// policy language) and returns it.
func (v *Vault) Token(t TB, name, policy string) string {
	t.Helper()
	v.do(t, "PUT", "/v1/sys/policies/acl/"+name, v.RootToken, map[string]any{"policy": policy}, nil)
	var out struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	v.do(t, "POST", "/v1/auth/token/create", v.RootToken, map[string]any{"policies": []string{name}, "no_default_policy": true}, &out)
	if out.Auth.ClientToken == "" {
		t.Fatalf("Vault made no token for policy %s", name)
	}
	return out.Auth.ClientToken
}

func (v *Vault) do(t TB, method, path, token string, body any, out any) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, v.Addr+path, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%v", err)
	}
	req.Header.Set("X-Vault-Token", token)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("Vault %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("Vault %s %s: %s: %s", method, path, resp.Status, b.String())
	}
	if out != nil {
		if err := json.Unmarshal(b.Bytes(), out); err != nil {
			t.Fatalf("Vault %s %s: %v", method, path, err)
		}
	}
}
