package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/controller"
	"sluice.dev/sluice/internal/dashboard"
	"sluice.dev/sluice/internal/source"
)

type serveFlags struct {
	syncKeySecret                             string
	kube                                      kubeFlags
	engine                                    engineFlags
	concurrent                                int
	registryRPS                               float64
	allowLocal                                bool
	selector                                  string
	leaderElect                               bool
	leaderNS                                  string
	leaderID                                  string
	identityToken                             string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	gitStall                                  time.Duration
	metricsAddr                               string
	pprofAddr                                 string
	healthAddr                                string
	hookAddr                                  string
	logLevel                                  string
	logEncoding                               string
	qps                                       float32
	burst                                     int
	allowBuilders                             bool
	dashboardAddr                             string
	dashboard                                 dashboard.Auth
	dashReadOnly                              bool
	dashboardURL                              string
}

func newServeCmd(s Streams) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the controller: ManifestSyncs, Images and RepoConfigs of a cluster, reconciled continuously",
		Long: `Run Sluice as a Kubernetes controller, in a cluster (kubectl apply -k
config/default) or out of one against a kubeconfig: the same engines as
'sluice hydrate', driven by the ManifestSync, Image and RepoConfig
resources of the cluster, each checked every spec.interval.

Each repository is fetched once per interval however many resources read
it, each tag looked up once; only syncs whose inputs changed are rendered,
and the syncs of one destination branch land as one commit. Credentials
come from the Secrets the resources name. Webhooks (/hook/NAMESPACE/NAME,
a Secret labelled sluice.dev/receiver=true with a token) trigger the
resources a push concerns at once. With --dashboard-addr it serves the
dashboard too, each person as themselves.`,
		Example: `  sluice serve --kubeconfig ~/.kube/config
  sluice serve --enable-leader-election --watch-label-selector 'sharding.sluice.dev/key in (shard1)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			serveMemory()
			log, err := f.logger(s)
			if err != nil {
				return &usageError{err}
			}
			lim, err := f.engine.limits.limits()
			if err != nil {
				return &usageError{err}
			}
			dir, err := f.engine.dir()
			if err != nil {
				return exit(2, err)
			}
			sb, err := f.engine.sandbox(controller.ObserveWorker)
			if err != nil {
				return &usageError{err}
			}
			defer closeSandbox(sb)
			cfg, err := cluster.RESTConfig(cluster.ConnectOptions{Kubeconfig: f.kube.kubeconfig, Context: f.kube.context})
			if err != nil {
				return exit(2, err)
			}
			keySecret, err := parseNamespacedName(f.syncKeySecret)
			if err != nil {
				return &usageError{fmt.Errorf("--sync-key-secret: %w", err)}
			}
			cfg.QPS, cfg.Burst = f.qps, f.burst
			cfg.UserAgent = "sluice-controller/" + sluiceVersion()
			err = controller.Run(cmd.Context(), controller.Options{
				Config: cfg, CacheDir: filepath.Join(dir, "controller"), Concurrent: f.concurrent, RegistryRPS: f.registryRPS,
				Insecure: f.engine.insecure, Limits: lim, AllowLocalRepos: f.allowLocal, AllowBuilders: f.allowBuilders,
				AllowRemoteHosts: f.engine.limits.allowRemote, NoRemoteBases: f.engine.limits.noRemoteBases, Sandbox: sb,
				WatchLabelSelector: f.selector, LeaderElection: f.leaderElect, LeaderElectionNamespace: f.leaderNS, LeaderElectionID: f.leaderID,
				IdentityTokenFile: f.identityToken, Version: sluiceVersion(),
				GitStallTimeout: f.gitStall, LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
				MetricsAddr: f.metricsAddr, ProbeAddr: f.healthAddr, HookAddr: f.hookAddr, PprofAddr: f.pprofAddr, Log: log,
				DashboardAddr: f.dashboardAddr, DashboardAuth: f.dashboard, DashboardReadOnly: f.dashReadOnly, DashboardURL: f.dashboardURL,
				SyncKeySecret: keySecret,
			})
			if err != nil && cmd.Context().Err() == nil {
				return exit(1, err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.kube.addConnection(fl)
	f.engine.addCache(fl)
	fl.IntVar(&f.concurrent, "concurrent", 4, "renders (and batches, and Image builds) at once")
	fl.Float64Var(&f.registryRPS, "registry-rps", 20, "requests per second to each registry host (a 429's Retry-After is always obeyed); every tag the syncs follow is looked up once an interval, so 2,000 tags at a 1m interval need 34: the controller warns when look-ups queue")
	fl.DurationVar(&f.gitStall, "git-stall-timeout", source.DefaultStallTimeout, "give up a request to a git server that has sent and taken nothing for this long (the repository then backs off); not a bound on a whole clone, which goes on while bytes flow")
	fl.BoolVar(&f.allowBuilders, "allow-builders", false, "let Images run their external builders (spec.builder) inside the controller")
	fl.BoolVar(&f.allowLocal, "allow-local-repos", false, "let resources name repositories on the controller's disk (absolute paths, file://): for trying it on your own machine only")
	fl.StringVar(&f.syncKeySecret, "sync-key-secret", "", "the Secret (NAMESPACE/NAME, key \"key\") holding the sync key charts' generated values and encrypted Secrets' digests derive from; read, never made (default: sluice-sync-key in the controller's namespace; make it with `sluice sync-key new --secret`)")
	fl.StringVar(&f.selector, "watch-label-selector", "", "reconcile only the resources this label selector matches (a shard)")
	fl.BoolVar(&f.leaderElect, "enable-leader-election", false, "elect one replica to reconcile, through a Lease")
	fl.StringVar(&f.leaderNS, "leader-election-namespace", "", "namespace of the Lease (default: the pod's, or default out of cluster)")
	fl.StringVar(&f.identityToken, "identity-token-file", "", "the controller's identity token for keyless signing of OCI artifacts (spec.destination.signing.keyless): a projected service account token of audience sigstore, read at each signature")
	fl.StringVar(&f.leaderID, "leader-election-id", "", "name of the Lease (default: sluice-controller, with a suffix per --watch-label-selector)")
	fl.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a Lease holds unrenewed before another replica takes it")
	fl.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader tries to renew its Lease before it stops leading (and pushes nothing more)")
	fl.DurationVar(&f.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often each replica tries to take or renew the Lease")
	fl.StringVar(&f.metricsAddr, "metrics-addr", ":8080", "where Prometheus metrics are served (0: nowhere)")
	fl.StringVar(&f.pprofAddr, "pprof-addr", "", "where Go's profiles are served, /debug/pprof/ (default: nowhere; keep it on loopback)")
	fl.StringVar(&f.healthAddr, "health-addr", ":9440", "where /healthz and /readyz are served (0: nowhere)")
	fl.StringVar(&f.hookAddr, "hook-addr", ":9292", "where webhook receivers (/hook/NAMESPACE/NAME) are served (0: nowhere)")
	fl.StringVar(&f.dashboardAddr, "dashboard-addr", "0", "where the dashboard is served (0: nowhere); each person logs in with a token the API server accepts and sees and does what RBAC lets them (config/dashboard grants the controller what that needs)")
	fl.BoolVar(&f.dashReadOnly, "dashboard-read-only", false, "the dashboard offers and accepts no action")
	fl.StringVar(&f.dashboardURL, "dashboard-url", "", "where people reach the dashboard (https://sluice.example.com): previews of pull requests link their comment and commit status to its page of the pull request")
	fl.StringVar(&f.dashboard.UserHeader, "dashboard-user-header", "", "header an authenticating proxy passes the user in (e.g. X-Forwarded-User); only when nothing but the proxy reaches the dashboard")
	fl.StringVar(&f.dashboard.GroupHeader, "dashboard-group-header", "", "header an authenticating proxy passes the user's groups in (e.g. X-Forwarded-Groups)")
	fl.BoolVar(&f.dashboard.SecureCookies, "dashboard-secure-cookies", false, "mark the login cookie Secure (the dashboard is reached over https)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logEncoding, "log-encoding", "json", "json or text")
	fl.Float32Var(&f.qps, "kube-api-qps", 100, "requests per second to the API server")
	fl.IntVar(&f.burst, "kube-api-burst", 300, "burst of requests to the API server")
	return cmd
}

// logger is the structured logger the flags ask for, on stderr.
func (f *serveFlags) logger(s Streams) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: expected debug, info, warn or error", f.logLevel)
	}
	o := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.logEncoding) {
	case "json":
		return slog.New(slog.NewJSONHandler(s.Err, o)), nil
	case "text", "console":
		return slog.New(slog.NewTextHandler(s.Err, o)), nil
	}
	return nil, errors.New("--log-encoding: expected json or text")
}

// serveMemory sets the collector for a process that runs for months with
// a heap as large as the estate it watches: the command line's soft limit
// (256 MiB, for short runs) would have it collect without pause at 10,000
// syncs (half the CPU of an idle interval). The soft limit is the
// container's memory limit less a tenth, if it has one; GOGC and
// GOMEMLIMIT override both.
func serveMemory() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(100)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit := int64(math.MaxInt64)
		if data, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil && n > 0 {
				limit = n - n/10
			}
		}
		debug.SetMemoryLimit(limit)
	}
}

// parseNamespacedName reads NAMESPACE/NAME (or NAME alone: the default
// namespace), "" being none.
func parseNamespacedName(s string) (types.NamespacedName, error) {
	if s == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = "", s
	}
	if name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%q: expected NAMESPACE/NAME", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
