package controller

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"sluice.dev/sluice/internal/sandbox"
)

// Sluice's own metrics, beside controller-runtime's (reconciles per
// controller and result, their durations, work queue depth), served on
// the manager's metrics address.
var (
	gitOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_git_requests_total",
		Help: "Requests to git remotes by operation: ls-remote (a ref advertisement), fetch, push.",
	}, []string{"op"})
	registryRateWait = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_registry_rate_wait_seconds_total",
		Help: "Time registry requests waited for --registry-rps, by host: growing by about a second every second, look-ups are queuing.",
	}, []string{"host"})
	registryRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_registry_requests_total",
		Help: "Requests to registries by host and HTTP status (0: no answer).",
	}, []string{"host", "code"})
	registryThrottled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_registry_throttled_total",
		Help: "429 answers from registries, by host.",
	}, []string{"host"})
	syncResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_manifestsync_results_total",
		Help: "What became of each ManifestSync reconciled: committed, unchanged, locked, failed.",
	}, []string{"result"})
	renders = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_renders_total",
		Help: "ManifestSyncs rendered (the others were seen unchanged from their fingerprints).",
	})
	commits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_commits_total",
		Help: "Commits pushed to destination branches.",
	})
	previewDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_preview_duration_seconds",
		Help:    "Time from a pull request's webhook to its preview posted (or failed).",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 12),
	})
	batchDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_batch_duration_seconds",
		Help:    "Time to hydrate one batch of ManifestSyncs of one destination branch.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
	batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_batch_syncs",
		Help:    "ManifestSyncs in one batch.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	hookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_webhook_requests_total",
		Help: "Webhook requests by kind and outcome (accepted, unauthorized, bad request, ignored).",
	}, []string{"kind", "outcome"})
	workerCPU = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_render_worker_cpu_seconds",
		Help:    "CPU time (user and system) of each render in a worker process (a warm worker's: that render's).",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
	workerPeak = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_render_worker_peak_bytes",
		Help:    "Peak resident memory of the worker process of each render.",
		Buckets: prometheus.ExponentialBuckets(16<<20, 2, 10),
	})
	workersConfined = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_render_workers_landlock_abi",
		Help: "The Landlock ABI confining render workers; 0: they run unconfined (no file or network confinement), -1: renders run in the controller's process.",
	})
	workerRenders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_render_worker_renders_total",
		Help: "Renders in worker processes: in a new worker (warm=false) or in one kept warm by an earlier render of the same namespace and source commit (warm=true).",
	}, []string{"warm"})
	workersKilled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_render_workers_killed_total",
		Help: "Render workers ended by a limit: timeout, memory, CPU.",
	}, []string{"limit"})
)

// collectors are Sluice's own metrics, registered with controller-runtime's.
var collectors = []prometheus.Collector{gitOps, registryRequests, registryRateWait, registryThrottled, syncResults, renders, commits, batchDuration, batchSize, hookRequests, previewDuration,
	workerCPU, workerPeak, workerRenders, workersKilled, workersConfined}

func init() { metrics.Registry.MustRegister(collectors...) }

func observeGit(op string) { gitOps.WithLabelValues(op).Inc() }

// rateWarning says, in the log, when look-ups queue behind a registry's
// rate: an estate whose tags, looked up once an interval, need more
// requests a second than --registry-rps allows falls behind without
// failing. Once per host per quarter of an hour at most.
type rateWarning struct {
	rps float64
	log *slog.Logger

	mu     sync.Mutex
	since  time.Time
	waited map[string]time.Duration
	warned map[string]time.Time
}

func newRateWarning(rps float64, log *slog.Logger) *rateWarning {
	return &rateWarning{rps: rps, log: log, since: time.Now(), waited: map[string]time.Duration{}, warned: map[string]time.Time{}}
}

// wait records a request's wait for the rate of host.
func (w *rateWarning) wait(host string, d time.Duration) {
	registryRateWait.WithLabelValues(host).Add(d.Seconds())
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if now.Sub(w.since) > time.Minute {
		clear(w.waited)
		w.since = now
	}
	w.waited[host] += d
	if w.waited[host] > 30*time.Second && now.Sub(w.warned[host]) > 15*time.Minute {
		w.warned[host] = now
		w.log.Warn("registry look-ups are queuing behind --registry-rps: the tags this controller looks up each interval need more requests a second than it allows, so pins and moved tags are seen late; raise --registry-rps if the registry allows it",
			"host", host, "registryRPS", w.rps, "waitedInTheLastMinute", w.waited[host].Round(time.Second).String())
	}
}

func observeRegistry(host string, status int) {
	registryRequests.WithLabelValues(host, strconv.Itoa(status)).Inc()
	if status == http.StatusTooManyRequests {
		registryThrottled.WithLabelValues(host).Inc()
	}
}

// ObserveWorker records what one render worker used; `sluice serve`
// gives it to its Sandbox.
func ObserveWorker(u sandbox.Usage) {
	workerCPU.Observe(u.CPU.Seconds())
	workerRenders.WithLabelValues(strconv.FormatBool(u.Warm)).Inc()
	if u.MaxRSS > 0 {
		workerPeak.Observe(float64(u.MaxRSS))
	}
	if u.Killed != "" {
		workersKilled.WithLabelValues(u.Killed).Inc()
	}
}

// metricsHandler serves the registry in the Prometheus text format.
func metricsHandler() http.Handler {
	return promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})
}
