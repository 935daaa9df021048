package testenv

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// TUFRepo is a TUF repository served over HTTP on loopback, laid out as
// Sigstore's (tuf-repo-cdn.sigstore.dev) is: consistent snapshots,
// versioned metadata, targets under their SHA-256. One key signs every
// role.
type TUFRepo struct {
	// URL is the repository's base URL.
	URL string
	// Requests counts the requests served.
	Requests atomic.Int64

	mu      sync.Mutex
	files   map[string][]byte
	down    bool
	signer  signature.Signer
	root    *metadata.Metadata[metadata.RootType]
	targets *metadata.Metadata[metadata.TargetsType]
	snap    *metadata.Metadata[metadata.SnapshotType]
	stamp   *metadata.Metadata[metadata.TimestampType]
	rootV1  []byte
}

// NewTUFRepo starts a repository holding no target yet.
func NewTUFRepo(t TB) *TUFRepo {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("%v", err)
	}
	signer, err := signature.LoadSigner(key, crypto.Hash(0))
	if err != nil {
		t.Fatalf("%v", err)
	}
	r := &TUFRepo{files: map[string][]byte{}, signer: signer}
	expires := time.Now().AddDate(0, 0, 30)
	r.root = metadata.Root(expires)
	r.root.Signed.ConsistentSnapshot = true
	k, err := metadata.KeyFromPublicKey(key.Public())
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, role := range []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP} {
		if err := r.root.Signed.AddKey(k, role); err != nil {
			t.Fatalf("%v", err)
		}
	}
	if _, err := r.root.Sign(signer); err != nil {
		t.Fatalf("%v", err)
	}
	if r.rootV1, err = r.root.ToBytes(false); err != nil {
		t.Fatalf("%v", err)
	}
	r.files["1.root.json"] = r.rootV1
	r.targets = metadata.Targets(expires)
	r.targets.Signed.Version = 0
	r.snap = metadata.Snapshot(expires)
	r.snap.Signed.Version = 0
	r.stamp = metadata.Timestamp(expires)
	r.stamp.Signed.Version = 0

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Root is the repository's first root metadata: a client's trust anchor.
func (r *TUFRepo) Root() []byte { return r.rootV1 }

// Publish adds (or replaces) a target and publishes new targets,
// snapshot and timestamp metadata naming it.
func (r *TUFRepo) Publish(t TB, name string, data []byte) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	tf, err := metadata.TargetFile().FromBytes(name, data, "sha256")
	if err != nil {
		t.Fatalf("%v", err)
	}
	sum := sha256.Sum256(data)
	r.files[path.Join("targets", hex.EncodeToString(sum[:])+"."+name)] = data
	r.targets.Signed.Targets[name] = tf
	r.targets.Signed.Version++
	r.snap.Signed.Meta["targets.json"] = metadata.MetaFile(r.targets.Signed.Version)
	r.snap.Signed.Version++
	r.stamp.Signed.Meta["snapshot.json"] = metadata.MetaFile(r.snap.Signed.Version)
	r.stamp.Signed.Version++
	r.targets.ClearSignatures()
	r.snap.ClearSignatures()
	r.stamp.ClearSignatures()
	for _, s := range []func() error{
		func() error { _, err := r.targets.Sign(r.signer); return err },
		func() error { _, err := r.snap.Sign(r.signer); return err },
		func() error { _, err := r.stamp.Sign(r.signer); return err },
	} {
		if err := s(); err != nil {
			t.Fatalf("%v", err)
		}
	}
	put := func(name string, b []byte, err error) {
		if err != nil {
			t.Fatalf("%v", err)
		}
		r.files[name] = b
	}
	b, err := r.targets.ToBytes(false)
	put(fmt.Sprintf("%d.targets.json", r.targets.Signed.Version), b, err)
	b, err = r.snap.ToBytes(false)
	put(fmt.Sprintf("%d.snapshot.json", r.snap.Signed.Version), b, err)
	b, err = r.stamp.ToBytes(false)
	put("timestamp.json", b, err)
}

// Tamper serves data in place of the target name's published content
// (under the same path): what a compromised mirror would do.
func (r *TUFRepo) Tamper(t TB, name string, data []byte) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	tf, ok := r.targets.Signed.Targets[name]
	if !ok {
		t.Fatalf("no target %s published", name)
	}
	r.files[path.Join("targets", hex.EncodeToString(tf.Hashes["sha256"])+"."+name)] = data
}

// Down makes the repository refuse every request (503) while down is
// set: a mirror that cannot be reached.
func (r *TUFRepo) Down(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *TUFRepo) serve(w http.ResponseWriter, req *http.Request) {
	r.Requests.Add(1)
	r.mu.Lock()
	data, ok := r.files[strings.TrimPrefix(req.URL.Path, "/")]
	down := r.down
	r.mu.Unlock()
	switch {
	case down:
		http.Error(w, "down", http.StatusServiceUnavailable)
	case !ok:
		http.NotFound(w, req)
	default:
		w.Write(data)
	}
}
