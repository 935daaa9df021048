package controller

import (
	"context"
	"fmt"
	"os"
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
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	return &leader{lock: lock, leaseDuration: leaseDuration, now: now}, nil
}

// stillLeads returns nil when the Lease, as the API server holds it now,
// is this replica's and unexpired; otherwise an error that says why not
// (which refuses the push asking).
func (l *leader) stillLeads(ctx context.Context) error {
	rec, _, err := l.lock.Get(ctx)
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
