package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/imagesig"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/synckey"
)

// engineFlags choose where the engines keep things, how they reach
// registries, and the limits every render runs within.
type engineFlags struct {
	insecure      []string
	cacheDir      string
	jobs          int
	allowBuilders bool
	limits        limitFlags
	isolation     string
	workerMemory  string
	workerCPU     time.Duration
	workersIdle   int
	signingKey    string
	syncKey       string
	trustedKeys   []string
	cosignKeys    []string
	trustedRoot   string
	notationTrust string
	notationCerts []string
}

func (e *engineFlags) add(fl *pflag.FlagSet) {
	e.addCache(fl)
	fl.IntVar(&e.jobs, "jobs", 4, "images built at once")
	fl.BoolVar(&e.allowBuilders, "allow-builders", false, "run the external builders (spec.builder) of Images found in RepoConfigs' repositories, which otherwise need spec.allowBuilders on the RepoConfig")
	e.addSigning(fl)
}

// addSigning adds the flag of the key that signs commits.
func (e *engineFlags) addSigning(fl *pflag.FlagSet) {
	fl.StringVar(&e.signingKey, "signing-key", "", "sign every commit with this SSH or OpenPGP private key (default: the key in $SLUICE_SIGNING_KEY, if any; its passphrase in $SLUICE_SIGNING_PASSPHRASE)")
	fl.StringVar(&e.syncKey, "sync-key", "", "the sync key file the values charts generate (passwords, keys, certificates) and the digests of encrypted Secrets derive from, the same at every hydration (default: the key in $SLUICE_SYNC_KEY, if any; make one with `sluice sync-key new`)")
	fl.StringArrayVar(&e.trustedKeys, "trusted-keys", nil, "a file of trusted keys (armored OpenPGP public keys, or SSH allowed signers) that sources with spec.source.verify must be signed by (repeatable)")
	fl.StringArrayVar(&e.cosignKeys, "cosign-key", nil, "a cosign public key (cosign.pub) that images whose rule has verify.secretRef must be signed by (repeatable)")
	fl.StringVar(&e.trustedRoot, "trusted-root", "", "the Sigstore trusted_root.json that keyless signatures (verify.keyless) are checked against (default: Sigstore's public instance)")
	fl.StringVar(&e.notationTrust, "notation-trust-policy", "", "the Notation trust policy (trustpolicy.json) that images whose rule has verify.provider notation are checked against")
	fl.StringArrayVar(&e.notationCerts, "notation-cert", nil, "a certificate (.crt or .pem) of the Notation trust policy's trust stores (repeatable)")
}

// addCache adds the flags of the caches and registries, and the limits.
func (e *engineFlags) addCache(fl *pflag.FlagSet) {
	fl.StringArrayVar(&e.insecure, "insecure-registry", nil, "registry host reached over plain HTTP (repeatable; loopback always is)")
	fl.StringVar(&e.cacheDir, "cache-dir", "", "where clones and charts are cached (default: the user cache directory)")
	e.limits.add(fl)
	d := sandbox.DefaultLimits()
	fl.StringVar(&e.isolation, "render-isolation", "process", "process: renders in worker processes, confined and limited, kept warm only for renders of one namespace's syncs of one source commit (reset and checked between them); render: a new worker process for every render; none: in this process")
	fl.StringVar(&e.workerMemory, sandbox.FlagMemory[2:], quantity(d.Memory), "the memory of one render's worker process")
	fl.DurationVar(&e.workerCPU, sandbox.FlagCPU[2:], d.CPU, "the CPU time of one render in a worker process")
	fl.IntVar(&e.workersIdle, "render-workers-idle", sandbox.DefaultIdle, "warm render workers kept waiting at most, each for its namespace and source commit (about 20 MiB each)")
}

// sandbox is where renders run: worker processes unless
// --render-isolation none. observe, if not nil, is told what each worker
// used.
func (e *engineFlags) sandbox(observe func(sandbox.Usage)) (*sandbox.Sandbox, error) {
	idle := 0
	switch e.isolation {
	case "none":
		return nil, nil
	case "process", "":
	case "render":
		idle = -1
	default:
		return nil, fmt.Errorf("--render-isolation %q: expected process, render or none", e.isolation)
	}
	mem, err := resource.ParseQuantity(e.workerMemory)
	if err != nil || mem.Sign() <= 0 {
		return nil, fmt.Errorf("%s %q: expected a size such as 1Gi", sandbox.FlagMemory, e.workerMemory)
	}
	if idle == 0 {
		if idle = e.workersIdle; idle <= 0 {
			idle = -1
		}
	}
	return sandbox.New(sandbox.Options{Limits: sandbox.Limits{Memory: mem.Value(), CPU: e.workerCPU}, Observe: observe, Idle: idle})
}

// closeSandbox ends a run's warm render workers, waiting for them (so
// that their time counts as the run's), where it has any.
func closeSandbox(sb *sandbox.Sandbox) {
	if sb != nil {
		sb.Close()
	}
}

// dir is the cache directory.
func (e *engineFlags) dir() (string, error) {
	if e.cacheDir != "" {
		return e.cacheDir, nil
	}
	d, err := source.DefaultDir()
	if err != nil {
		return "", fmt.Errorf("finding a cache directory (set --cache-dir): %w", err)
	}
	return filepath.Dir(d), nil
}

// engines makes the clone cache, builder and hydration options, sharing
// one registry client, so syncs pin what was just pushed.
func (e *engineFlags) engines(s Streams) (*source.Cache, *build.Builder, hydrate.Options, error) {
	dir, err := e.dir()
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	lim, err := e.limits.limits()
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	reg := registry.New(registry.WithInsecure(e.insecure...))
	// New commits to fetch mean renders ahead: warm kustomize up while
	// the fetch runs.
	cache := source.NewCache(filepath.Join(dir, "git"), source.WithAuth(source.AuthFromEnv(os.Getenv)), source.WithFetchHook(render.Warm))
	b := &build.Builder{Cache: cache, Registry: reg, Jobs: e.jobs, Log: s.Err, AllowBuilders: e.allowBuilders}
	policy, err := e.limits.egress()
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	sb, err := e.sandbox(nil)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	signer, err := signing.Load(e.signingKey, os.Getenv)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	verifier, err := signing.LoadVerifier(e.trustedKeys)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	cosignKeys, err := imagesig.LoadKeys(e.cosignKeys)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	key, err := synckey.Load(e.syncKey, os.Getenv)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	h := hydrate.Options{
		Cache: cache, Registry: reg, Charts: &render.Charts{Registry: reg, CacheDir: filepath.Join(dir, "charts")},
		StateDir: dir, Limits: lim, Egress: policy, NoRemoteBases: e.limits.noRemoteBases, Sandbox: sb, Signer: signer,
		SyncKey: key,
	}
	if verifier != nil {
		h.VerifierFor = func(config.ManifestSync) (*signing.Verifier, error) { return verifier, nil }
	}
	root, err := imagesig.LoadTrustedRoot(e.trustedRoot)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	// Keyless rules under Sigstore's public instance: its root as its TUF
	// repository has it now (fetched once, when a rule first asks).
	public := &imagesig.PublicRoot{CacheDir: filepath.Join(dir, "sigstore"), Log: slog.Default()}
	notation, err := imagesig.LoadNotation(e.notationTrust, e.notationCerts)
	if err != nil {
		return nil, nil, hydrate.Options{}, err
	}
	h.ImagePolicyFor = func(_ config.ManifestSync, rule v1alpha1.ImageRule) (*imagesig.Policy, error) {
		if rule.Verify.Provider == v1alpha1.VerifyNotation {
			if notation == nil {
				return nil, errors.New("verify.provider notation: give the trust policy with --notation-trust-policy and its certificates with --notation-cert")
			}
			return &imagesig.Policy{Notation: notation, Name: "the trust policy " + e.notationTrust}, nil
		}
		root := root
		if root == nil && rule.Verify.Keyless != nil {
			root = public.Root(context.Background())
		}
		pol, err := imagesig.PolicyFor(rule.Verify, cosignKeys, root)
		if err != nil && rule.Verify.Keyless == nil {
			return nil, fmt.Errorf("%w: give its public key with --cosign-key", err)
		}
		return pol, err
	}
	h.ImagesVerified = &imagesig.Verified{} // a digest many syncs pin is checked once per run
	return cache, b, h, nil
}

// limitFlags bound every render (see render.Limits), and say where what
// a source names may be read from.
type limitFlags struct {
	fileSize, readSize, outputSize string
	objects, aliasNodes            int
	entries, depth                 int
	timeout                        time.Duration
	allowRemote                    []string
	noRemoteBases                  bool
}

func (l *limitFlags) add(fl *pflag.FlagSet) {
	d := render.DefaultLimits()
	fl.StringVar(&l.fileSize, render.FlagFileBytes[2:], quantity(d.FileBytes), "the largest file a render reads")
	fl.StringVar(&l.readSize, render.FlagReadBytes[2:], quantity(d.ReadBytes), "what one render reads in all")
	fl.StringVar(&l.outputSize, render.FlagOutputBytes[2:], quantity(d.OutputBytes), "what one render produces in all")
	fl.IntVar(&l.objects, render.FlagObjects[2:], d.Objects, "the most objects one render produces")
	fl.IntVar(&l.aliasNodes, render.FlagAliasNodes[2:], d.AliasNodes, "the most nodes YAML aliases add to one file")
	fl.IntVar(&l.entries, render.FlagEntries[2:], d.Entries, "the most files and folders one render lists")
	fl.IntVar(&l.depth, render.FlagDepth[2:], d.Depth, "how deeply one document may nest")
	fl.DurationVar(&l.timeout, render.FlagTimeout[2:], d.Timeout, "how long one render may take")
	fl.StringSliceVar(&l.allowRemote, egress.FlagAllow[2:], nil, "hosts (host, host:port, *.domain), addresses and CIDRs that the remote kustomize bases and files a source names may be read from although private, loopback, link-local or cluster-internal (the hosts of your own files' repositories always may)")
	fl.BoolVar(&l.noRemoteBases, "no-remote-bases", false, "refuse remote kustomize bases and files: a source must hold what it renders")
}

// egress is where what sources name may be read from.
func (l *limitFlags) egress() (*egress.Policy, error) {
	return egress.New(l.allowRemote)
}

func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }

// limits parses the flags.
func (l *limitFlags) limits() (render.Limits, error) {
	out := render.Limits{Objects: l.objects, AliasNodes: l.aliasNodes, Entries: l.entries, Depth: l.depth, Timeout: l.timeout}
	for _, q := range []struct {
		flag, v string
		dst     *int64
	}{{render.FlagFileBytes, l.fileSize, &out.FileBytes}, {render.FlagReadBytes, l.readSize, &out.ReadBytes}, {render.FlagOutputBytes, l.outputSize, &out.OutputBytes}} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil || v.Sign() <= 0 {
			return out, fmt.Errorf("%s %q: expected a size such as 64Mi", q.flag, q.v)
		}
		*q.dst = v.Value()
	}
	return out, nil
}

// renderFlags are what a local render is told of the cluster it is for,
// as `helm template` and `helm install` take it.
type renderFlags struct {
	kubeVersion string
	apiVersions []string
	includeCRDs bool
	insecure    []string
}

func (r *renderFlags) add(fl *pflag.FlagSet, cluster bool) {
	kube := "the Kubernetes version charts are rendered for (default: helm's, the version its release is built for)"
	apis := "an API version charts see in .Capabilities.APIVersions, besides helm's defaults (repeatable)"
	if cluster {
		kube = "the Kubernetes version charts are rendered for (default: the cluster's)"
		apis = "an API version charts see in .Capabilities.APIVersions, besides the cluster's (repeatable)"
	}
	fl.StringVar(&r.kubeVersion, "kube-version", "", kube)
	fl.StringSliceVarP(&r.apiVersions, "api-versions", "a", nil, apis)
}

// options makes the render options of a local directory: remote bases and
// files opened in process (no git binary), charts fetched through the
// registry client; with a cluster, what a chart is told of it is asked of
// it, as `helm install` does.
func (r *renderFlags) options(c *cluster.Client, l *limitFlags) (render.Options, error) {
	lim, err := l.limits()
	if err != nil {
		return render.Options{}, err
	}
	policy, err := l.egress()
	if err != nil {
		return render.Options{}, err
	}
	ro := render.Options{
		Charts:       &render.Charts{Registry: registry.New(registry.WithInsecure(r.insecure...))},
		Capabilities: render.Capabilities{KubeVersion: r.kubeVersion, APIVersions: r.apiVersions},
		IncludeCRDs:  r.includeCRDs,
		Limits:       lim,
		Fetch:        render.FetchFiles(nil),
	}
	if d, err := source.DefaultDir(); err == nil {
		cache := source.NewCache(d, source.WithAuth(source.AuthFromEnv(os.Getenv)))
		ro.Bases, ro.Egress = render.GitBases(cache, nil), policy.Allowing(cache.TrustedHosts()...)
	}
	if l.noRemoteBases {
		ro.Bases, ro.Fetch = nil, nil
	}
	if c != nil {
		ro.IncludeCRDs = true // helm install installs a chart's crds/ first
		ro.Cluster = func(ctx context.Context) (render.Capabilities, error) {
			caps, err := c.ServerCapabilities(ctx)
			return render.Capabilities{KubeVersion: caps.Version, ServerAPIVersions: caps.APIVersions}, err
		}
	}
	return ro, nil
}
