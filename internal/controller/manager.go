package controller

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/credentials"
	"sluice.dev/sluice/internal/dashboard"
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/imagesig"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/synckey"
)

// Options configure the controller.
type Options struct {
	// Config reaches the API server. Required.
	Config *rest.Config
	// CacheDir keeps the clones and charts. Required.
	CacheDir string
	// Concurrent bounds the renders (and the batches, and the Image
	// builds) running at once; the default is 4.
	Concurrent int
	// RegistryRPS bounds the requests per second to each registry host;
	// the default is 20.
	RegistryRPS float64
	// Insecure are registry hosts reached over plain HTTP.
	Insecure []string
	// GitStallTimeout gives up a request to a git server that has sent
	// and taken nothing for this long (the repository then backs off as
	// any failing one); 0 is source.DefaultStallTimeout, 2 minutes.
	GitStallTimeout time.Duration
	// Limits bound each render (render.DefaultLimits for zero fields).
	Limits render.Limits
	// AllowLocalRepos lets resources name repositories on the controller's
	// disk (absolute paths, file://): for trying the controller on one's
	// own machine only.
	AllowLocalRepos bool
	// AllowBuilders lets Images run their external builders (spec.builder)
	// inside the controller.
	AllowBuilders bool
	// AllowRemoteHosts names the private, loopback, link-local and
	// cluster-internal hosts, addresses and CIDRs the controller may
	// connect to for its resources (their repositories, registries, chart
	// repositories, and the remote bases and files their sources name):
	// nothing else of those is reached (see egress.New).
	AllowRemoteHosts []string
	// NoRemoteBases refuses remote kustomize bases and files, as Flux's
	// kustomize-controller --no-remote-bases does.
	NoRemoteBases bool
	// Sandbox runs each render, and each pull request template a sync
	// sets, in a worker process of its own (`sluice serve` always gives
	// one unless --render-isolation none); nil renders in the
	// controller's own process.
	Sandbox *sandbox.Sandbox
	// WatchLabelSelector shards: only the resources it selects are
	// reconciled by this controller ("sharding.sluice.dev/key in (a)").
	WatchLabelSelector string
	// LeaderElection makes only one replica reconcile at a time (the
	// others wait on a Lease), in LeaderElectionNamespace (default: the
	// pod's, or "default" out of cluster), under LeaderElectionID
	// (default: sluice-controller, with a suffix per shard).
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaseDuration, RenewDeadline and RetryPeriod time the election (as
	// Flux's flags of the same names): how long a Lease holds unrenewed
	// before another replica takes it (15s), how long the leader tries to
	// renew before it gives up leading (10s), and how often each replica
	// tries (2s). A replica that finds it no longer leads stops, and
	// pushes nothing meanwhile.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MetricsAddr, ProbeAddr and HookAddr are where the metrics, the
	// /healthz and /readyz probes and the webhook receivers are served
	// ("0" turns one off).
	MetricsAddr, ProbeAddr, HookAddr string
	// PprofAddr serves Go's profiles (/debug/pprof/) there ("" or "0":
	// not at all): for whoever runs the controller, never for its users.
	PprofAddr string
	// DashboardAddr serves the dashboard there ("" or "0": not at all),
	// each person as themselves (see dashboard.Auth): DashboardAuth says
	// how they are known, DashboardReadOnly refuses every action.
	DashboardAddr     string
	DashboardAuth     dashboard.Auth
	DashboardReadOnly bool
	// DashboardURL, if set, is where people reach the dashboard (through
	// their Ingress or proxy): a preview's comment and commit status
	// link to its page of the pull request.
	DashboardURL string
	// SyncKeySecret is the Secret whose "key" is the sync key the values
	// charts generate, and encrypted Secrets' digests, derive from (see
	// package synckey); the default is sluice-sync-key in the
	// controller's namespace. It is read, never made.
	SyncKeySecret types.NamespacedName
	// IdentityTokenFile is the controller's own identity token for keyless
	// signing: a projected service account token of audience sigstore,
	// read at each signature (the kubelet refreshes it). "": syncs asking
	// for keyless signing fail, saying so.
	IdentityTokenFile string
	// Version is Sluice's, for the provenance attested of artifacts.
	Version string
	// Log receives the controller's structured logs; the default discards
	// them.
	Log *slog.Logger
	// Now is the clock locks expire by; the default is time.Now.
	Now func() time.Time
	// Ready, if set, is called with the addresses served once the
	// controller runs (for tests and `sluice dev cluster --serve`).
	Ready func(Addrs)
}

// Addrs are the addresses a running controller serves.
type Addrs struct {
	Hook, Metrics, Probe, Dashboard string
}

// maxWaitingSyncs bounds the ManifestSync reconciles at once.
const maxWaitingSyncs = 4096

// Scheme holds the kinds the controller reads.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	clientgoscheme.AddToScheme(s)
	v1alpha1.AddToScheme(s)
	return s
}

// What the controller needs of the cluster beside its own resources (see
// config/rbac, generated from these lines by `make generate`): the
// Secrets resources name, read one by one (never listed or watched), and
// Events. Leader election's Leases are a Role of its own namespace.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Run runs the controller until ctx ends (or, with leader election, until
// this replica loses the lease).
func Run(ctx context.Context, o Options) error {
	if o.Config == nil || o.CacheDir == "" {
		return errors.New("controller: Config and CacheDir are required")
	}
	if o.Concurrent <= 0 {
		o.Concurrent = 4
	}
	if o.RegistryRPS == 0 {
		o.RegistryRPS = 20
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ctrl.SetLogger(logr.FromSlogHandler(o.Log.Handler()))
	cacheOpts := cache.Options{}
	if o.WatchLabelSelector != "" {
		sel, err := labels.Parse(o.WatchLabelSelector)
		if err != nil {
			return fmt.Errorf("--watch-label-selector %q: %w", o.WatchLabelSelector, err)
		}
		cacheOpts.DefaultLabelSelector = sel
	}
	if o.LeaderElection {
		if o.LeaderElectionID == "" {
			o.LeaderElectionID = "sluice-controller"
			if o.WatchLabelSelector != "" {
				// Each shard elects its own leader.
				sum := sha256.Sum256([]byte(o.WatchLabelSelector))
				o.LeaderElectionID += "-" + hex.EncodeToString(sum[:4])
			}
		}
		if o.LeaderElectionNamespace == "" {
			o.LeaderElectionNamespace = podNamespace()
		}
		o.LeaseDuration = cmp.Or(o.LeaseDuration, defaultLeaseDuration)
		o.RenewDeadline = cmp.Or(o.RenewDeadline, defaultRenewDeadline)
		o.RetryPeriod = cmp.Or(o.RetryPeriod, defaultRetryPeriod)
		if o.RenewDeadline >= o.LeaseDuration || o.RetryPeriod >= o.RenewDeadline {
			return fmt.Errorf("leader election: the retry period (%s) must be shorter than the renew deadline (%s), and that than the lease duration (%s)", o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
		}
	}
	var lead *leader
	var pushGuard func(context.Context) error
	if o.LeaderElection {
		var err error
		if lead, err = newLeader(o.Config, o.LeaderElectionNamespace, o.LeaderElectionID, o.LeaseDuration, o.RenewDeadline, o.Now); err != nil {
			return err
		}
		pushGuard = lead.stillLeads
	}
	listeners := map[string]net.Listener{}
	for name, addr := range map[string]string{"metrics": o.MetricsAddr, "probe": o.ProbeAddr, "hook": o.HookAddr, "dashboard": o.DashboardAddr, "pprof": o.PprofAddr} {
		if addr == "0" || addr == "" {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("listening for %s on %s: %w", name, addr, err)
		}
		listeners[name] = l
	}
	addr := func(name string) string {
		if l, ok := listeners[name]; ok {
			return l.Addr().String()
		}
		return ""
	}

	mopts := ctrl.Options{
		Scheme:                        Scheme(),
		Logger:                        logr.FromSlogHandler(o.Log.Handler()),
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if lead != nil {
		mopts.LeaderElectionResourceLockInterface = lead.lock
		mopts.LeaseDuration, mopts.RenewDeadline, mopts.RetryPeriod = &o.LeaseDuration, &o.RenewDeadline, &o.RetryPeriod
	}
	mgr, err := ctrl.NewManager(o.Config, mopts)
	if err != nil {
		return err
	}
	if l, ok := listeners["metrics"]; ok {
		if err := mgr.Add(&httpServer{name: "metrics", l: l, h: metricsHandler()}); err != nil {
			return err
		}
	}
	if l, ok := listeners["pprof"]; ok {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		if err := mgr.Add(&httpServer{name: "pprof", l: l, h: mux}); err != nil {
			return err
		}
	}
	if l, ok := listeners["probe"]; ok {
		if err := mgr.Add(&httpServer{name: "probes", l: l, h: probes(mgr)}); err != nil {
			return err
		}
	}
	if err := addIndexes(ctx, mgr); err != nil {
		return err
	}
	policy, err := egress.New(o.AllowRemoteHosts)
	if err != nil {
		return err
	}
	eng := newEngines(o.CacheDir, o.RegistryRPS, o.Insecure, o.Limits, policy, pushGuard, o.GitStallTimeout)
	eng.limiter.OnWait(newRateWarning(o.RegistryRPS, o.Log).wait)
	sec := credentials.NewSecrets(mgr.GetAPIReader())
	sec.Public = &imagesig.PublicRoot{CacheDir: filepath.Join(o.CacheDir, "sigstore"), Log: o.Log}
	sec.Transport = policy.Guard(http.DefaultTransport.(*http.Transport))
	if o.IdentityTokenFile != "" {
		sec.IdentityToken = artifactsig.TokenFile(o.IdentityTokenFile)
	}
	rec := checkedEvents{EventRecorder: mgr.GetEventRecorder("sluice-controller"), log: o.Log}
	batch := newBatcher(egress.WithPolicy(ctx, policy), eng, o.Concurrent, o.Log)
	batch.base.Egress, batch.base.NoRemoteBases, batch.base.Sandbox = policy, o.NoRemoteBases, o.Sandbox
	batch.base.Version = o.Version
	keyRef := o.SyncKeySecret
	if keyRef.Namespace == "" {
		keyRef.Namespace = podNamespace()
	}
	if keyRef.Name == "" {
		keyRef.Name = synckey.SecretName
	}
	batch.keys = &syncKeys{secrets: sec, ref: keyRef}
	isolation := "none: renders run in the controller's process"
	workersConfined.Set(-1)
	if o.Sandbox != nil {
		isolation = o.Sandbox.Isolation()
		abi, why := o.Sandbox.Confinement()
		workersConfined.Set(float64(abi))
		if abi == 0 {
			o.Log.Warn("render workers are not confined: a render can read any file this user can and open network connections; only their limits and empty environment hold", "why", why)
		}
	}
	// Webhooks received by the leader queue their syncs' reconciles here.
	var msr *ManifestSyncReconciler
	requests := make(chan event.GenericEvent, 1024)
	direct := func(syncs []*v1alpha1.ManifestSync, at time.Time, what string) bool {
		select {
		case <-mgr.Elected():
		default:
			return false
		}
		for _, ms := range syncs {
			msr.attempts.ask(client.ObjectKeyFromObject(ms), at, what)
			requests <- event.GenericEvent{Object: ms}
		}
		return true
	}
	// A tag a look-up in the background found moved asks for the
	// reconciles of the syncs that follow it, as a registry's
	// notification does.
	eng.moved = func(ch registry.Change) {
		key := imageKey(ch.Repository, ch.Tag)
		var syncs v1alpha1.ManifestSyncList
		if err := mgr.GetClient().List(ctx, &syncs, client.MatchingFields{indexImage: key}); err != nil {
			o.Log.Warn("a moved tag's syncs could not be listed", "image", key, "err", err)
			return
		}
		targets := make([]*v1alpha1.ManifestSync, len(syncs.Items))
		for i := range syncs.Items {
			targets[i] = &syncs.Items[i]
		}
		o.Log.Debug("tag moved", "image", key, "syncs", len(targets))
		direct(targets, ch.At, v1alpha1.RequestForImages)
	}
	if l, ok := listeners["hook"]; ok {
		pv := &previews{ctx: ctx, log: o.Log, dashboard: strings.TrimSuffix(o.DashboardURL, "/"), running: map[string]bool{}, waiting: map[string]previewJob{}, limited: map[string]time.Time{}}
		h := &hooks{client: mgr.GetClient(), direct: direct, secrets: sec, log: o.Log, now: o.Now,
			preview: func(ns string, ev pullRequestEvent, syncs []*v1alpha1.ManifestSync) {
				pv.queue(msr, ns, ev, syncs)
			}}
		mux := http.NewServeMux()
		mux.Handle(hookPrefix, h)
		if err := mgr.Add(&httpServer{name: "webhooks", l: l, h: mux}); err != nil {
			return err
		}
	}
	if l, ok := listeners["dashboard"]; ok {
		// Every replica serves it, leader or not: it reads, and acts as
		// each person.
		auth := o.DashboardAuth
		pv := &preview.Previewer{Hydrate: batch.base, AllowLocal: o.AllowLocalRepos,
			RegistryFor: func(kc authn.Keychain, id string) (*registry.Client, *render.Charts) {
				c := eng.registry(id, kc)
				return c.reg, c.charts
			}}
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			d, err := dashboard.New(ctx, o.Config, dashboard.Options{Auth: &auth, ReadOnly: o.DashboardReadOnly, Preview: pv, Log: o.Log})
			if err != nil {
				l.Close()
				return fmt.Errorf("dashboard: %w", err)
			}
			return d.Serve(ctx, l)
		})); err != nil {
			return err
		}
	}
	// A status write is no reason to reconcile; a new generation, a
	// reconcile request and a deletion are.
	api, err := newAPIServer(o.Config, o.Log)
	if err != nil {
		return err
	}
	changed := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	msr = &ManifestSyncReconciler{Client: mgr.GetClient(), secrets: sec, engines: eng, batch: batch, events: rec,
		log: o.Log, allowLocal: o.AllowLocalRepos, now: o.Now, attempts: newAttempts()}
	// A reconcile waits on its branch's batch: the batches (--concurrent
	// at once), not the reconciles, bound the work, and the reconciles
	// waiting bound how many syncs a batch gathers. 512 of them over 50
	// branches made batches of 6 syncs from 10,000 due, each paying a
	// commit and a push; a waiting reconcile costs a goroutine.
	if err := ctrl.NewControllerManagedBy(mgr).Named("manifestsync").For(&v1alpha1.ManifestSync{}, changed).
		WatchesRawSource(source.Channel(requests, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxWaitingSyncs}).Complete(gated{msr, api}); err != nil {
		return err
	}
	ir := &ImageReconciler{Client: mgr.GetClient(), secrets: sec, engines: eng, events: rec, log: o.Log,
		allowLocal: o.AllowLocalRepos, allowBuilders: o.AllowBuilders, now: o.Now, attempts: newAttempts()}
	if err := ctrl.NewControllerManagedBy(mgr).Named("image").For(&v1alpha1.Image{}, changed).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Concurrent}).Complete(gated{ir, api}); err != nil {
		return err
	}
	base := batch.base
	rcr := &RepoConfigReconciler{Client: mgr.GetClient(), secrets: sec, engines: eng, base: base, events: rec, log: o.Log,
		allowLocal: o.AllowLocalRepos, allowBuilders: o.AllowBuilders, now: o.Now, attempts: newAttempts()}
	if err := ctrl.NewControllerManagedBy(mgr).Named("repoconfig").For(&v1alpha1.RepoConfig{}, changed).
		WithOptions(controller.Options{MaxConcurrentReconciles: o.Concurrent}).Complete(gated{rcr, api}); err != nil {
		return err
	}
	o.Log.Info("starting", "concurrent", o.Concurrent, "registryRPS", o.RegistryRPS, "isolation", isolation, "watchLabelSelector", o.WatchLabelSelector,
		"leaderElection", o.LeaderElection, "hook", addr("hook"), "metrics", addr("metrics"), "probe", addr("probe"))
	if o.Ready != nil {
		o.Ready(Addrs{Hook: addr("hook"), Metrics: addr("metrics"), Probe: addr("probe"), Dashboard: addr("dashboard")})
	}
	return mgr.Start(ctx)
}

// podNamespace is the namespace this pod runs in, or "default" out of a
// cluster.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(data))
	}
	return "default"
}

// probes serves /healthz (the process answers) and /readyz (its caches are
// in sync).
func probes(mgr manager.Manager) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}))
	mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{
		"informers": func(req *http.Request) error {
			ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
			defer cancel()
			if !mgr.GetCache().WaitForCacheSync(ctx) {
				return errors.New("the caches are not in sync yet")
			}
			return nil
		},
	}}))
	return mux
}

// httpServer serves a handler on every replica (leader or not) for as long
// as the manager runs.
type httpServer struct {
	name string
	l    net.Listener
	h    http.Handler
}

func (s *httpServer) NeedLeaderElection() bool { return false }

func (s *httpServer) Start(ctx context.Context) error {
	srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", s.name, err)
	}
	return nil
}
