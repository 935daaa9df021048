package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/ociartifact"
)

// ociNS holds the OCI estate's syncs; serveNS the git estate's.
const ociNS = "bench-oci"

// ociSync is sync (r, a) of the OCI estate: the git estate's sync, its
// destination the artifact of its branch's name as a tag, signed with
// the cosign key of Secret cosign.
func (s *serveBench) ociSync(r, a int) *v1alpha1.ManifestSync {
	ms := s.manifestSync(r, a, "deploy")
	i := r*s.appsPerRepo() + a
	ms.Spec.Destination = v1alpha1.Destination{Repo: "oci://" + s.reg.Host + "/team/deploy", Tag: s.branchOf(i), Path: "apps/" + s.syncName(r, a),
		Signing: &v1alpha1.Signing{SecretRef: &v1alpha1.SecretRef{Name: "cosign"}}}
	ms.Namespace = ociNS
	return ms
}

// runOCI is `bench serve -oci`: the same estate applied twice to one
// controller, into OCI destinations (first, with the source clones
// cold) and into git branches (second), each until all are Ready; one
// idle interval; and the cost of signing an artifact against pushing it.
func (s *serveBench) runOCI() error {
	ctx := context.Background()
	if err := s.setUp(); err != nil {
		return err
	}
	// The OCI destination's requests apart from the images' look-ups.
	var dstRequests atomic.Int64
	s.reg.FailWith(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/team/deploy/") {
			dstRequests.Add(1)
		}
		return 0
	})
	key, keyPEM, err := benchCosignKey()
	if err != nil {
		return err
	}
	_, logf, stop, err := s.startController(ctx, "bench-token", serveNS, ociNS)
	defer stop()
	if err != nil {
		return err
	}
	if err := s.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cosign", Namespace: ociNS}, Data: map[string][]byte{"cosign.key": keyPEM}}); err != nil {
		return err
	}
	pid := s.ctrl.Process.Pid
	total := s.repos * s.appsPerRepo()

	type phase struct {
		name                  string
		ready, created        time.Duration
		cpu                   time.Duration
		git, reg, dst, writes int64
	}
	writes := func() float64 { return s.metric(`sluice_manifestsync_results_total{result="committed"}`) }
	apply := func(name, ns string, newSync func(r, a int) *v1alpha1.ManifestSync) (phase, error) {
		p := phase{name: name}
		git0, reg0, dst0, cpu0, w0 := s.git.Requests.Load(), s.reg.Requests.Load(), dstRequests.Load(), cpuOf(pid), writes()
		start := time.Now()
		created, err := s.createAll(ctx, func(r, a int) *v1alpha1.ManifestSync {
			ms := newSync(r, a)
			ms.Namespace = ns
			return ms
		})
		p.created = created
		if err != nil {
			return p, err
		}
		if err := s.allReadyIn(ctx, ns, start, total); err != nil {
			return p, fmt.Errorf("%s: %w (see %s)", name, err, logf.Name())
		}
		p.ready = time.Since(start)
		p.cpu = cpuOf(pid) - cpu0
		p.git, p.reg, p.dst = s.git.Requests.Load()-git0, s.reg.Requests.Load()-reg0, dstRequests.Load()-dst0
		p.writes = int64(writes() - w0)
		return p, nil
	}
	var ociPhase, gitPhase phase
	phases := []func() error{
		func() (err error) { ociPhase, err = apply("OCI", ociNS, s.ociSync); return err },
		func() (err error) {
			gitPhase, err = apply("git", serveNS, func(r, a int) *v1alpha1.ManifestSync { return s.manifestSync(r, a, "deploy") })
			return err
		},
	}
	if s.gitFirst {
		slices.Reverse(phases)
	}
	for _, run := range phases {
		if err := run(); err != nil {
			return err
		}
	}
	// Artifacts pushed: one per tag that changed, counted at the
	// registry (a tag's manifest PUT).
	tags, err := s.pushedTags(ctx)
	if err != nil {
		return err
	}

	// One idle interval, nothing changed.
	time.Sleep(5 * time.Second)
	git0, reg0, dst0, cpu0 := s.git.Requests.Load(), s.reg.Requests.Load(), dstRequests.Load(), cpuOf(pid)
	time.Sleep(s.interval)
	idleGit, idleReg, idleDst, idleCPU := s.git.Requests.Load()-git0, s.reg.Requests.Load()-reg0, dstRequests.Load()-dst0, cpuOf(pid)-cpu0
	readyOCI, _, _ := s.readyIn(ctx, ociNS, "")
	readyGit, _, _ := s.readyIn(ctx, serveNS, "")

	// The cost of signing, in this process: pushing an artifact of one
	// folder, unsigned and then signed (the signature and the provenance
	// attestation, each a referrer), on the loopback registry.
	const artifacts = 50
	signer := artifactsig.CosignKey(key, "the bench key")
	unsigned, signed, err := s.signingCost(ctx, artifacts, signer)
	if err != nil {
		return err
	}
	_, hwm := procStat(pid)

	order := "into OCI destinations first (its source clones and image look-ups cold), then into git"
	if s.gitFirst {
		order = "into git first (its source clones and image look-ups cold), then into OCI destinations"
	}
	fmt.Printf("On a local kube-apiserver v1.37.2 with the loopback git server and registry: %d ManifestSyncs over %d source repositories and %d image tags, applied twice to one controller (`sluice serve`, --concurrent 4, --render-isolation %s), %s: %d tags of one OCI repository (each artifact signed with a cosign key and given its SLSA provenance), %d branches of one git repository. Interval %s. GOMAXPROCS=%d.\n\n",
		total, s.repos, s.tags, s.isolation, order, s.branches, s.branches, s.interval, runtime.GOMAXPROCS(0))
	fmt.Println("| measure | OCI | git | OCI / git |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| applying %d syncs → all Ready | %s | %s | %.2fx |\n", total, round(ociPhase.ready), round(gitPhase.ready), float64(ociPhase.ready)/float64(gitPhase.ready))
	fmt.Printf("| controller CPU (its workers' included) | %s | %s | %.2fx |\n", round(ociPhase.cpu), round(gitPhase.cpu), float64(ociPhase.cpu)/float64(gitPhase.cpu))
	fmt.Printf("| syncs that wrote (committed / pushed) | %d | %d | |\n", ociPhase.writes, gitPhase.writes)
	fmt.Printf("| git requests | %d | %d | |\n", ociPhase.git, gitPhase.git)
	fmt.Printf("| registry requests (of them, the destination's) | %d (%d) | %d (0) | |\n", ociPhase.reg, ociPhase.dst, gitPhase.reg)
	fmt.Printf("| artifacts tagged (the moving tags and one immutable tag each) | %d tags | | |\n", tags)
	fmt.Printf("| one idle interval (%s), both estates: registry requests (the destination's), git requests, controller CPU | %d (%d), %d, %s; %d and %d of %d Ready | | |\n",
		s.interval, idleReg, idleDst, idleGit, round(idleCPU), readyOCI, readyGit, total)
	fmt.Printf("| push of one artifact: unsigned / signed with a cosign key and its provenance (mean of %d) | %s / %s (%.2fx; signing adds %s) | | |\n",
		artifacts, round(unsigned), round(signed), float64(signed)/float64(unsigned), round(signed-unsigned))
	fmt.Printf("| controller peak RSS | %d MiB | | |\n", hwm/1024)
	return nil
}

// cpuOf is a process's CPU time so far, its workers' included.
func cpuOf(pid int) time.Duration { c, _ := procStat(pid); return c }

// pushedTags counts the tags of the OCI destination's repository.
func (s *serveBench) pushedTags(ctx context.Context) (int, error) {
	repo, err := name.NewRepository(s.reg.Host+"/team/deploy", name.Insecure)
	if err != nil {
		return 0, err
	}
	tags, err := remote.List(repo, remote.WithContext(ctx))
	return len(tags), err
}

// signingCost pushes n artifacts unsigned, then n signed by signer, each
// of other content, and returns the mean time of each.
func (s *serveBench) signingCost(ctx context.Context, n int, signer artifactsig.Signer) (unsigned, signed time.Duration, err error) {
	predicate, err := artifactsig.Provenance{Version: "bench", Syncs: []artifactsig.SyncProvenance{{Name: "bench/app", Folder: "apps/app"}}}.Predicate()
	if err != nil {
		return 0, 0, err
	}
	push := func(i int, sign bool) (time.Duration, error) {
		tag, err := name.NewTag(fmt.Sprintf("%s/team/signing:t%d-%t", s.reg.Host, i, sign), name.Insecure)
		if err != nil {
			return 0, err
		}
		img, err := ociartifact.Pack(map[string][]byte{
			"apps/app/configmap.yaml":  []byte(configMap(i, i)),
			"apps/app/deployment.yaml": []byte(fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app%d}\n", i)),
		}, ociartifact.Meta{})
		if err != nil {
			return 0, err
		}
		o := ociartifact.PushOptions{}
		if sign {
			o.BeforeTag = func(ctx context.Context, ref name.Digest) error {
				return signer.Sign(ctx, artifactsig.Target{Ref: ref}, artifactsig.SLSAPredicate, predicate)
			}
		}
		t0 := time.Now()
		_, err = ociartifact.Push(ctx, tag, img, o)
		return time.Since(t0), err
	}
	for i := 0; i < n; i++ {
		u, err := push(i, false)
		if err != nil {
			return 0, 0, err
		}
		sg, err := push(i, true)
		if err != nil {
			return 0, 0, err
		}
		unsigned += u
		signed += sg
	}
	return unsigned / time.Duration(n), signed / time.Duration(n), nil
}

// benchCosignKey is a new cosign key (ECDSA P-256, PKCS #8 PEM, as
// cosign reads an unencrypted one).
func benchCosignKey() (*artifactsig.Key, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	key, err := artifactsig.ParseKey(data, nil)
	return key, data, err
}
