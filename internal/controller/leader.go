package controller

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The leader election timings, as controller-runtime's (and Flux's flags
// of the same names) default them.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// leader is this replica's part in leader election: the Lease it
// campaigns for, under an identity of its own, and the check every push
// makes that it still leads.
//
// A replica paused past its lease (a stopped process, a frozen node, a
// long GC) wakes up with work in flight while another replica leads. Its
// elector finds out at its next renewal and stops the manager, but the
// pushes already under way would land first: each asks the API server
// (never a cache) before it goes.
type leader struct {
	lock          resourcelock.Interface
	check         resourcelock.Interface // read by stillLeads only
	leaseDuration time.Duration
	now           func() time.Time
}

func newLeader(cfg *rest.Config, namespace, name string, leaseDuration, renewDeadline time.Duration, now func() time.Time) (*leader, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	c := rest.CopyConfig(cfg)
	c = rest.AddUserAgent(c, "leader-election")
	// One hung request must not cost the lease (as controller-runtime
	// sets it).
	c.Timeout = max(renewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	identity := resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(), identity)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	// The pushes' check reads the Lease through a lock of its own: a lock
	// keeps the Lease it last read, and client-go's elector renews by
	// updating that copy without reading it again. Read through the
	// elector's lock, a check made after another replica took the Lease
	// handed the elector the taker's version, and its next renewal took
	// the Lease back (the stale leader kept leading; the test of a taken
	// Lease found it).
	check, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(), identity)
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return &leader{lock: &releaseGuard{Interface: lock}, check: check, leaseDuration: leaseDuration, now: now}, nil
}

// releaseGuard is the Lease lock with the check client-go's release
// lacks: a replica stepping down (its manager stopping) clears the Lease
// only if the record it has just read names it. client-go reads the Lease
// afresh before releasing but then trusts its own earlier view that it
// leads, so a leader paused past its Lease, resumed and stopping cleared
// the Lease the other replica had taken meanwhile (the soak found it: the
// new leader lost the Lease 12s after taking it, to a third replica
// starting, and restarted).
type releaseGuard struct {
	resourcelock.Interface
	mu     sync.Mutex
	holder string // as the last read found it
}

func (g *releaseGuard) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := g.Interface.Get(ctx)
	if err == nil {
		g.mu.Lock()
		g.holder = rec.HolderIdentity
		g.mu.Unlock()
	}
	return rec, raw, err
}

func (g *releaseGuard) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	if err := g.Interface.Create(ctx, rec); err != nil {
		return err
	}
	g.mu.Lock()
	g.holder = rec.HolderIdentity
	g.mu.Unlock()
	return nil
}

func (g *releaseGuard) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	g.mu.Lock()
	holder := g.holder
	g.mu.Unlock()
	if rec.HolderIdentity == "" && holder != g.Identity() {
		return fmt.Errorf("not releasing Lease %s: %s holds it, not this replica", g.Describe(), holder)
	}
	if err := g.Interface.Update(ctx, rec); err != nil {
		return err
	}
	g.mu.Lock()
	g.holder = rec.HolderIdentity
	g.mu.Unlock()
	return nil
}

// stillLeads returns nil when the Lease, as the API server holds it now,
// is this replica's and unexpired; otherwise an error that says why not
// (which refuses the push asking).
func (l *leader) stillLeads(ctx context.Context) error {
	rec, _, err := l.check.Get(ctx)
	if err != nil {
		return fmt.Errorf("cannot tell whether this replica still leads (reading Lease %s: %w)", l.lock.Describe(), err)
	}
	if rec.HolderIdentity != l.lock.Identity() {
		holder := rec.HolderIdentity
		if holder == "" {
			holder = "nobody"
		}
		return fmt.Errorf("this replica no longer leads: Lease %s is held by %s", l.lock.Describe(), holder)
	}
	d := time.Duration(rec.LeaseDurationSeconds) * time.Second
	if d <= 0 {
		d = l.leaseDuration
	}
	if expired := rec.RenewTime.Add(d); !l.now().Before(expired) {
		return fmt.Errorf("this replica's Lease %s ran out at %s, %s ago, without renewal", l.lock.Describe(), expired.UTC().Format(time.RFC3339), l.now().Sub(expired).Round(time.Second))
	}
	return nil
}
