package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sluice.dev/sluice/internal/devcluster"
)

// Fulcio is the real Sigstore certificate authority (`make tools` builds
// it: hack/fulcio) on loopback, with an ephemeral CA, issuing
// certificates for the tokens of one OIDC issuer.
type Fulcio struct {
	// URL is its HTTP API's.
	URL string
	// Chain is its CA's certificate chain (PEM), as /api/v1/rootCert
	// serves it.
	Chain []byte
}

// StartFulcio starts Fulcio trusting issuer (tokens of audience
// clientID) of the given type (kubernetes: a cluster's service account
// tokens; email, github-workflow, ...: as Fulcio's config names them),
// reaching the issuer over TLS that issuerCA (PEM) signs; it stops when
// the test ends.
func StartFulcio(t TB, issuer, issuerType, clientID string, issuerCA []byte) *Fulcio {
	t.Helper()
	dir := tempDir(t, "fulcio-")
	cfg, _ := json.Marshal(map[string]any{"OIDCIssuers": map[string]any{issuer: map[string]string{"IssuerURL": issuer, "ClientID": clientID, "Type": issuerType}}})
	write(t, filepath.Join(dir, "config.json"), cfg)
	write(t, filepath.Join(dir, "issuer-ca.pem"), issuerCA)
	port, grpcPort, metricsPort := freePort(t), freePort(t), freePort(t)
	cmd := exec.Command(versionedTool(t, "fulcio"), "serve", "--ca=ephemeralca", "--ct-log-url=", "--config-path="+filepath.Join(dir, "config.json"),
		"--host=127.0.0.1", "--port="+port, "--grpc-host=127.0.0.1", "--grpc-port="+grpcPort, "--metrics-port="+metricsPort,
		"--legacy-unix-domain-socket="+filepath.Join(dir, "legacy.sock"), "--log_type=dev")
	// Fulcio reads the issuer's discovery document and keys over TLS: the
	// issuer's CA is the one it trusts.
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+filepath.Join(dir, "issuer-ca.pem"))
	f := &Fulcio{URL: "http://127.0.0.1:" + port}
	startServer(t, cmd, filepath.Join(dir, "fulcio.log"))
	f.Chain = waitGet(t, f.URL+"/api/v1/rootCert", filepath.Join(dir, "fulcio.log"))
	return f
}

// TimestampAuthority is Sigstore's real RFC 3161 timestamp authority
// (`make tools` builds it: hack/timestamp-server) on loopback, its key
// in memory.
type TimestampAuthority struct {
	// URL is where timestamps are asked for (/api/v1/timestamp).
	URL string
	// Chain is its certificate chain (PEM, the signing certificate first).
	Chain []byte
}

// StartTimestampAuthority starts one; it stops when the test ends.
func StartTimestampAuthority(t TB) *TimestampAuthority {
	t.Helper()
	dir := tempDir(t, "tsa-")
	port := freePort(t)
	cmd := exec.Command(versionedTool(t, "timestamp-server"), "serve", "--host=127.0.0.1", "--port="+port, "--timestamp-signer=memory", "--disable-ntp-monitoring", "--log-type=dev")
	startServer(t, cmd, filepath.Join(dir, "tsa.log"))
	base := "http://127.0.0.1:" + port + "/api/v1/timestamp"
	return &TimestampAuthority{URL: base, Chain: waitGet(t, base+"/certchain", filepath.Join(dir, "tsa.log"))}
}

// SigstoreTrustedRoot is the trusted_root.json of a Sigstore deployment
// of f, tsa and rekor, as `cosign verify --trusted-root` and sigstore-go
// read it.
func SigstoreTrustedRoot(t TB, f *Fulcio, tsa *TimestampAuthority, rekor *Rekor) []byte {
	t.Helper()
	authority := func(uri string, pemChain []byte) *prototrustroot.CertificateAuthority {
		chain := &protocommon.X509CertificateChain{}
		var start time.Time
		for rest := pemChain; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatalf("%s: %v", uri, err)
			}
			if start.IsZero() || c.NotBefore.After(start) {
				start = c.NotBefore
			}
			chain.Certificates = append(chain.Certificates, &protocommon.X509Certificate{RawBytes: c.Raw})
		}
		return &prototrustroot.CertificateAuthority{Uri: uri, CertChain: chain, ValidFor: &protocommon.TimeRange{Start: timestamppb.New(start)}}
	}
	tr := &prototrustroot.TrustedRoot{
		MediaType:              "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
		CertificateAuthorities: []*prototrustroot.CertificateAuthority{authority(f.URL, f.Chain)},
		TimestampAuthorities:   []*prototrustroot.CertificateAuthority{authority(tsa.URL, tsa.Chain)},
	}
	if rekor != nil {
		block, _ := pem.Decode(rekor.PublicKey)
		if block == nil {
			t.Fatalf("Rekor's public key is not PEM")
		}
		id := sha256.Sum256(block.Bytes)
		tr.Tlogs = []*prototrustroot.TransparencyLogInstance{{
			BaseUrl: rekor.URL, HashAlgorithm: protocommon.HashAlgorithm_SHA2_256,
			PublicKey: &protocommon.PublicKey{RawBytes: block.Bytes, KeyDetails: protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256,
				ValidFor: &protocommon.TimeRange{Start: timestamppb.New(time.Now().Add(-time.Hour))}},
			LogId: &protocommon.LogId{KeyId: id[:]},
		}}
	}
	b, err := protojson.Marshal(tr)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return b
}

// startServer runs cmd, its output into logFile, until the test ends.
func startServer(t TB, cmd *exec.Cmd, logFile string) {
	t.Helper()
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	devcluster.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
		if f, ok := t.(interface {
			Failed() bool
			Logf(string, ...any)
		}); ok && f.Failed() {
			out, _ := os.ReadFile(logFile)
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			f.Logf("%s:\n%s", filepath.Base(cmd.Path), out)
		}
	})
}

// waitGet GETs url until it answers 200 (30 s at most) and returns the
// body; the server's log is shown when it never does.
func waitGet(t TB, url, logFile string) []byte {
	t.Helper()
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			last = err
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(body)) > 0 {
			return body
		}
		last = fmt.Errorf("%s: %s", resp.Status, body)
	}
	log, _ := os.ReadFile(logFile)
	t.Fatalf("%s never answered: %v\n%s", url, last, log)
	return nil
}

// freePort is a free loopback TCP port.
func freePort(t TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func write(t TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("%v", err)
	}
}

// tempDir is a directory removed when the test ends.
func tempDir(t TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sluice-"+prefix)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// ClusterSigstore is a private Sigstore deployment for a control plane:
// Fulcio trusting its service accounts' tokens of audience sigstore
// (the API server is a real OIDC issuer), and a timestamp authority.
type ClusterSigstore struct {
	Fulcio *Fulcio
	TSA    *TimestampAuthority
	Rekor  *Rekor
	// Issuer is the cluster's OIDC issuer, as certificates name it.
	Issuer string
	// TrustedRoot is the file of the deployment's trusted_root.json.
	TrustedRoot string
	kc          kubernetes.Interface
}

// StartClusterSigstore starts one for cp: its OIDC discovery made
// readable without credentials (the binding Kubernetes documents for
// issuer discovery), Fulcio and the timestamp authority started.
func StartClusterSigstore(t TB, cp *ControlPlane) *ClusterSigstore {
	t.Helper()
	ctx := context.Background()
	kc, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatalf("%v", err)
	}
	_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "service-account-issuer-discovery-unauthenticated"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:unauthenticated"}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%v", err)
	}
	s := &ClusterSigstore{Issuer: strings.TrimSuffix(cp.Config.Host, "/") + "/", kc: kc}
	s.Fulcio = StartFulcio(t, s.Issuer, "kubernetes", "sigstore", cp.Config.CAData)
	s.TSA = StartTimestampAuthority(t)
	s.Rekor = StartRekor(t)
	s.TrustedRoot = filepath.Join(t.TempDir(), "trusted_root.json")
	write(t, s.TrustedRoot, SigstoreTrustedRoot(t, s.Fulcio, s.TSA, s.Rekor))
	return s
}

// Token writes a token of the service account namespace/name (both made
// when missing) for audience into a file, as a projected service account
// token volume holds one, and returns the file's path.
func (s *ClusterSigstore) Token(t TB, namespace, name, audience string) string {
	t.Helper()
	ctx := context.Background()
	_, err := s.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%v", err)
	}
	_, err = s.kc.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%v", err)
	}
	tr, err := s.kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := filepath.Join(t.TempDir(), "token")
	write(t, p, []byte(tr.Status.Token))
	return p
}

// Identity is the identity Fulcio certifies for a service account.
func (s *ClusterSigstore) Identity(namespace, name string) string {
	return "https://kubernetes.io/namespaces/" + namespace + "/serviceaccounts/" + name
}

// VerifyArgs are cosign verify's flags for a signature of identity made
// through s: its trusted root (the transparency log's key in it) and
// issuer; no SCT (the Fulcio has no certificate log).
func (s *ClusterSigstore) VerifyArgs(identity string) []string {
	return []string{"--trusted-root", s.TrustedRoot, "--certificate-oidc-issuer", s.Issuer, "--certificate-identity", identity, "--insecure-ignore-sct"}
}

// Rekor is Sigstore's real transparency log (rekor-server, `make tools`
// builds it: hack/rekor) on loopback, over the real Trillian (hack/trillian)
// and a MariaDB server of its own (Debian's, hack/mariadb), its signing
// key in memory.
type Rekor struct {
	// URL is its API's.
	URL string
	// PublicKey is its log's key (PEM), as /api/v1/log/publicKey serves it.
	PublicKey []byte
}

// StartRekor starts a database, Trillian's log server and signer, and
// Rekor (which makes its tree); they stop when the test ends.
func StartRekor(t TB) *Rekor {
	t.Helper()
	dir := tempDir(t, "rekor-")
	mariadbd, err := exec.LookPath("mariadbd")
	if err != nil {
		t.Fatalf("mariadbd is not installed: run `make tools` (or hack/mariadb/install.sh) first; `make test` does")
	}
	trillian := filepath.Dir(versionedToolIn(t, "trillian", "trillian_log_server"))
	if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "sock")
	startServer(t, exec.Command(mariadbd, "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--socket="+sock, "--skip-networking",
		"--user=root", "--skip-grant-tables", "--skip-log-bin", "--innodb-buffer-pool-size=32M"), filepath.Join(dir, "mariadb.log"))
	schema, err := os.ReadFile(filepath.Join(trillian, "storage.sql"))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var last []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		cmd := exec.Command("mariadb", "--no-defaults", "-S", sock, "-e", "CREATE DATABASE trillian; USE trillian; "+string(schema))
		if last, err = cmd.CombinedOutput(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "mariadb.log"))
			t.Fatalf("the database never served: %v\n%s\n%s", err, last, log)
		}
	}
	uri := "root@unix(" + sock + ")/trillian"
	rpc, health := freePort(t), freePort(t)
	startServer(t, exec.Command(filepath.Join(trillian, "trillian_log_server"), "--storage_system=mysql", "--mysql_uri="+uri, "--quota_system=noop",
		"--rpc_endpoint=127.0.0.1:"+rpc, "--http_endpoint=127.0.0.1:"+health), filepath.Join(dir, "log-server.log"))
	// Rekor makes its tree at start: the log server must serve first.
	waitGet(t, "http://127.0.0.1:"+health+"/healthz", filepath.Join(dir, "log-server.log"))
	startServer(t, exec.Command(filepath.Join(trillian, "trillian_log_signer"), "--storage_system=mysql", "--mysql_uri="+uri, "--quota_system=noop",
		"--force_master", "--sequencer_interval=100ms", "--batch_size=100", "--rpc_endpoint=127.0.0.1:"+freePort(t), "--http_endpoint=127.0.0.1:"+freePort(t)), filepath.Join(dir, "log-signer.log"))
	port := freePort(t)
	startServer(t, exec.Command(versionedToolIn(t, "rekor", "rekor-server"), "serve", "--trillian_log_server.address=127.0.0.1", "--trillian_log_server.port="+rpc,
		"--rekor_server.address=127.0.0.1", "--port="+port, "--enable_retrieve_api=false", "--rekor_server.signer=memory", "--enable_attestation_storage=false", "--log_type=dev"),
		filepath.Join(dir, "rekor.log"))
	r := &Rekor{URL: "http://127.0.0.1:" + port}
	r.PublicKey = waitGet(t, r.URL+"/api/v1/log/publicKey", filepath.Join(dir, "rekor.log"))
	return r
}
