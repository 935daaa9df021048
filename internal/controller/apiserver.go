package controller

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sluice.dev/sluice/internal/backoff"
)

// apiServerEvery bounds the wait between two looks at an API server that
// does not answer: once it is back, every status is written again within
// about this long.
const apiServerEvery = 10 * time.Second

// apiServer knows, for every reconcile at once, whether the API server
// answers. A reconcile that finds it gone (a restart, etcd down behind
// it) marks it down: from then on reconciles wait without working, one
// prober asks its /readyz with backoff (5s, then every 10s, jittered),
// and when it answers they go on. Without it each failing reconcile was
// retried on its own from 5ms up (up to 10 a second overall), a
// hydration, a status patch and a "Reconciler error" line each time: 12
// per sync in a 20s outage.
type apiServer struct {
	log   *slog.Logger
	probe func(context.Context) error

	mu      sync.Mutex
	down    bool
	since   time.Time
	fails   backoff.Failures
	probing bool
}

func newAPIServer(cfg *rest.Config, log *slog.Logger) (*apiServer, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return nil, err
	}
	return &apiServer{log: log, probe: func(ctx context.Context) error {
		return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}}, nil
}

// wait is how long a reconcile waits for the API server: 0 when it
// answers (as far as anyone knows).
func (a *apiServer) wait(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.down {
		return 0
	}
	next := a.nextLook(now)
	// Just after the next look, spread so that a recovering API server
	// is not met by every sync at once.
	return max(next.Sub(now), 0) + time.Second + rand.N(2*time.Second)
}

// failed tells of an API call that failed; when the failure says the API
// server is unreachable it is marked down (said once) and failed returns
// how long the reconcile waits.
func (a *apiServer) failed(ctx context.Context, err error) (time.Duration, bool) {
	if !unreachable(err) || ctx.Err() != nil {
		return 0, false
	}
	a.mu.Lock()
	if !a.down {
		a.down, a.since = true, time.Now()
		a.fails.Record(context.Background(), err, 0, apiServerEvery, [32]byte{})
		a.log.Error("the API server does not answer: reconciles wait for it, asking its /readyz until it does", "error", err.Error(), "nextTry", a.nextLook(a.since).UTC().Format(time.TimeOnly))
	}
	if !a.probing {
		a.probing = true
		go a.prober()
	}
	a.mu.Unlock()
	return a.wait(time.Now()), true
}

// nextLook is when the prober asks /readyz next (zero: now); the caller
// holds a.mu.
func (a *apiServer) nextLook(now time.Time) time.Time {
	if re := (*backoff.RetryError)(nil); errors.As(a.fails.Shared(now, time.Time{}, [32]byte{}), &re) {
		return re.Next
	}
	return time.Time{}
}

// prober asks /readyz at each next try until the API server answers.
func (a *apiServer) prober() {
	for {
		a.mu.Lock()
		next := a.nextLook(time.Now())
		a.mu.Unlock()
		time.Sleep(time.Until(next))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.probe(ctx)
		cancel()
		a.mu.Lock()
		if err == nil {
			a.fails.Record(context.Background(), nil, 0, 0, [32]byte{})
			a.down, a.probing = false, false
			a.log.Info("the API server answers again: reconciles go on", "after", time.Since(a.since).Round(time.Second))
			a.mu.Unlock()
			return
		}
		a.fails.Record(context.Background(), err, 0, apiServerEvery, [32]byte{})
		a.mu.Unlock()
	}
}

// unreachable reports whether err says the API server could not be
// reached or could not serve now (rather than refusing the request).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// gated makes a reconciler wait while the API server is down.
type gated struct {
	reconcile.Reconciler
	api *apiServer
}

func (g gated) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if d := g.api.wait(time.Now()); d > 0 {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	res, err := g.Reconciler.Reconcile(ctx, req)
	if d, ok := g.api.failed(ctx, err); ok {
		return ctrl.Result{RequeueAfter: d}, nil
	}
	return res, err
}
