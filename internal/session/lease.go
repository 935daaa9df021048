package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotations of a session's Lease: what `sluice run list` shows without
// reading records.
const (
	annotationPath    = "sluice.dev/path"
	annotationBranch  = "sluice.dev/branch"
	annotationMode    = "sluice.dev/mode"
	annotationStarted = "sluice.dev/started"
	annotationState   = "sluice.dev/state"
	annotationStop    = "sluice.dev/stop-requested-by"
	// annotationPaused lists, a line each, what the session pauses.
	annotationPaused = "sluice.dev/paused"
	// annotationRestored is what a session stopped from elsewhere put
	// back, for the process that asked (which then deletes the Lease).
	annotationRestored = "sluice.dev/restored"
)

// States of a session.
const (
	StateActive    = "active"
	StateStale     = "stale"
	StateRestoring = "restoring"
	// StateEnded: restored, its report waiting for whoever asked it to
	// stop.
	StateEnded = "ended"
)

// errLost says another process took the session's Lease: someone restored
// the session (its heartbeat had stopped too long).
var errLost = errors.New("the session's lease was taken over")

func leaseName(session string) string { return "sluice-run-" + session }

// lease is a session's coordination.k8s.io Lease, held by one process.
type lease struct {
	mu       sync.Mutex // the heartbeat and Stop both renew
	c        client.Client
	obj      *coordinationv1.Lease
	identity string
}

// acquireLease creates the Lease of a new session; a session of that name
// that exists already is an error naming its holder.
func acquireLease(ctx context.Context, c client.Client, name, identity string, duration time.Duration, summary map[string]string) (*lease, error) {
	now := metav1.NewMicroTime(time.Now())
	secs := int32(duration / time.Second)
	obj := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: leaseName(name), Namespace: SystemNamespace,
			Labels:      map[string]string{labelSession: name, labelManagedBy: "sluice"},
			Annotations: summary,
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &identity, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}
	err := c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		var live coordinationv1.Lease
		if c.Get(ctx, client.ObjectKeyFromObject(obj), &live) == nil {
			state := leaseState(&live, time.Now())
			hint := "choose another --session name"
			if state == StateStale {
				hint = "it is stale: run `sluice run cleanup` first, or choose another --session name"
			}
			return nil, fmt.Errorf("session %s already exists (held by %s, %s): %s", name, holder(&live), state, hint)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating the lease of session %s: %w", name, err)
	}
	return &lease{c: c, obj: obj, identity: identity}, nil
}

// renew records a heartbeat, with the session's summary. It reports
// whether someone asked the session to stop, and errLost when another
// process holds the Lease now.
func (l *lease) renew(ctx context.Context, summary map[string]string) (stopBy string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var live coordinationv1.Lease
	if err := l.c.Get(ctx, client.ObjectKeyFromObject(l.obj), &live); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errLost
		}
		return "", err
	}
	if holder(&live) != l.identity {
		return "", errLost
	}
	stopBy = live.Annotations[annotationStop]
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	for k, v := range summary {
		live.Annotations[k] = v
	}
	now := metav1.NewMicroTime(time.Now())
	live.Spec.RenewTime = &now
	if err := l.c.Update(ctx, &live); err != nil {
		return stopBy, err
	}
	l.obj = &live
	return stopBy, nil
}

// takeLease makes identity the holder of a session's Lease, in state
// restoring, unless another process took it since live was read.
func takeLease(ctx context.Context, c client.Client, live *coordinationv1.Lease, identity string) (*lease, error) {
	obj := live.DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	obj.Spec.HolderIdentity = &identity
	obj.Spec.AcquireTime, obj.Spec.RenewTime = &now, &now
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[annotationState] = StateRestoring
	if err := c.Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) {
			return nil, fmt.Errorf("session %s: another process took it over meanwhile", live.Labels[labelSession])
		}
		return nil, err
	}
	return &lease{c: c, obj: obj, identity: identity}, nil
}

// report leaves what the session put back on its Lease, for the process
// that asked it to stop, and waits (at most wait) for that process to take
// it, deleting the Lease.
func (l *lease) report(ctx context.Context, r *Restoration, wait time.Duration) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l.mu.Lock()
	obj := l.obj.DeepCopy()
	l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if obj.Annotations == nil {
			obj.Annotations = map[string]string{}
		}
		obj.Annotations[annotationState] = StateEnded
		obj.Annotations[annotationRestored] = string(data)
		err := l.c.Update(ctx, obj)
		if apierrors.IsConflict(err) && attempt < 5 {
			if err := l.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var live coordinationv1.Lease
		if err := l.c.Get(ctx, client.ObjectKeyFromObject(obj), &live); apierrors.IsNotFound(err) {
			return nil
		}
	}
	return nil
}

func (l *lease) release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.c.Delete(ctx, l.obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseState is active while the holder renews, stale once a whole lease
// duration passed without a heartbeat, restoring while being restored.
func leaseState(l *coordinationv1.Lease, now time.Time) string {
	if l.Annotations[annotationState] == StateEnded {
		return StateEnded
	}
	if l.Annotations[annotationState] == StateRestoring && !expired(l, now) {
		return StateRestoring
	}
	if expired(l, now) {
		return StateStale
	}
	return StateActive
}

func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}
