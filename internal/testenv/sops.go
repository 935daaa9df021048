package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// SOPSBinary returns the sops CLI that `make tools` builds
// (hack/sops/build.sh: the release of go.mod's github.com/getsops/sops/v3).
func SOPSBinary(t TB) string {
	t.Helper()
	return tool(t, "sops", "github.com/getsops/sops/v3", "hack/sops/build.sh")
}

// SOPSEncrypt encrypts a YAML document for an age recipient with the
// real sops CLI (`sops encrypt --age R --encrypted-regex REGEX`): what a
// person commits, and Flux decrypts.
func SOPSEncrypt(t TB, plain, recipient, encryptedRegex string) string {
	t.Helper()
	args := []string{"--age", recipient}
	if encryptedRegex != "" {
		args = append(args, "--encrypted-regex", encryptedRegex)
	}
	return SOPSEncryptFile(t, "secret.yaml", plain, nil, args...)
}

// GnuPGHome is a GnuPG home holding the entity's public key, imported
// by the real gpg, for the sops CLI to encrypt for it (GNUPGHOME=...).
func GnuPGHome(t TB, entity *openpgp.Entity) string {
	t.Helper()
	home := t.TempDir()
	if err := os.Chmod(home, 0o700); err != nil { // a GnuPG home is private
		t.Fatalf("gpg: %v", err)
	}
	var pub bytes.Buffer
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatalf("gpg: %v", err)
	}
	if err := entity.Serialize(w); err != nil {
		t.Fatalf("gpg: %v", err)
	}
	w.Close()
	cmd := exec.Command("gpg", "--batch", "--homedir", home, "--import")
	cmd.Stdin = &pub
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpg --import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("gpgconf", "--homedir", home, "--kill", "all").Run() })
	return home
}

// SOPSEncryptFile encrypts plain with the real sops CLI as a file named
// name (whose extension gives its format: .yaml, .json, .env, .ini, or
// anything else for binary), with sops's arguments args (the keys:
// --age R, --pgp FP, --kms ARN, --shamir-secret-sharing-threshold N with
// several groups...), env added to its environment.
func SOPSEncryptFile(t TB, name, plain string, env []string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(plain), 0o600); err != nil {
		t.Fatalf("sops: %v", err)
	}
	// No .sops.yaml of the caller's tree, no key of this machine's user.
	// --config is a global flag, given before the command.
	var global []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--config" && i+1 < len(args) {
			global = append(global, args[i], args[i+1])
			args = append(args[:i:i], args[i+2:]...)
			i--
		}
	}
	cmd := exec.Command(SOPSBinary(t), append(append(append(global, "encrypt"), args...), p)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops encrypt %s %s: %v\n%s", strings.Join(args, " "), name, err, stderr.String())
	}
	return string(out)
}
