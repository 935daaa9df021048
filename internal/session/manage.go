package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
)

// Info is what `sluice run list` shows of a session.
type Info struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder"`
	Started time.Time `json:"started"`
	Path    string    `json:"path"`
	Branch  string    `json:"branch,omitempty"`
	Mode    Mode      `json:"mode"`
	// Heartbeat is the time since the holder last renewed the Lease.
	Heartbeat time.Duration `json:"heartbeat"`
	// State is active, stale (the heartbeat stopped: the process was
	// killed, the laptop closed) or restoring.
	State string `json:"state"`
	// Paused says, per owner, what the session pauses and how.
	Paused []string `json:"paused,omitempty"`
	lease  *coordinationv1.Lease
}

func infoOf(l *coordinationv1.Lease, now time.Time) Info {
	started, _ := time.Parse(time.RFC3339, l.Annotations[annotationStarted])
	in := Info{
		Name: l.Labels[labelSession], Holder: holder(l), Started: started,
		Path: l.Annotations[annotationPath], Branch: l.Annotations[annotationBranch], Mode: Mode(l.Annotations[annotationMode]),
		State: leaseState(l, now), lease: l,
	}
	if p := l.Annotations[annotationPaused]; p != "" {
		in.Paused = strings.Split(p, "\n")
	}
	if l.Spec.RenewTime != nil {
		in.Heartbeat = now.Sub(l.Spec.RenewTime.Time).Truncate(time.Second)
	}
	return in
}

// List returns every session on the cluster, by name.
func List(ctx context.Context, c *cluster.Client) ([]Info, error) {
	var leases coordinationv1.LeaseList
	if err := c.Kube().List(ctx, &leases, client.InNamespace(SystemNamespace), client.HasLabels{labelSession}); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	now := time.Now()
	out := make([]Info, 0, len(leases.Items))
	for i := range leases.Items {
		if in := infoOf(&leases.Items[i], now); in.State != StateEnded {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ErrNoSession says there is no session of that name.
var ErrNoSession = errors.New("no such session")

// Get returns one session.
func Get(ctx context.Context, c *cluster.Client, name string) (Info, error) {
	var l coordinationv1.Lease
	err := c.Kube().Get(ctx, client.ObjectKey{Namespace: SystemNamespace, Name: leaseName(name)}, &l)
	if apierrors.IsNotFound(err) {
		return Info{}, fmt.Errorf("session %s: %w", name, ErrNoSession)
	}
	if err != nil {
		return Info{}, err
	}
	return infoOf(&l, time.Now()), nil
}

// Stop ends the session this process holds: the heartbeat stops, and
// everything the session changed is put back (or, with Handoff, kept for
// GitOps to adopt), then its record and Lease are deleted. The context
// should outlive a Ctrl+C: an interrupted restore leaves the session for
// `sluice run cleanup`.
func (s *Session) Stop(ctx context.Context) (*Restoration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	// The heartbeat goes on while restoring, so no one takes a session
	// that is restoring itself for a stale one.
	defer s.stopHeartbeat()
	s.setSummary(annotationState, StateRestoring)
	by, err := s.lease.renew(ctx, s.summaryCopy())
	if by != "" {
		s.stopAsked.Store(true)
	}
	if errors.Is(err, errLost) {
		return nil, fmt.Errorf("session %s was restored by another process meanwhile", s.o.Name)
	}
	if err := s.store.write(ctx, s.rec); err != nil {
		return nil, err
	}
	var r *Restoration
	if s.o.Handoff {
		r, err = handOver(ctx, s.c, s.rec)
	} else {
		r, err = restore(ctx, s.c, s.rec)
	}
	if err != nil {
		return r, err
	}
	s.stopHeartbeat()
	if err := s.store.remove(ctx); err != nil {
		return r, fmt.Errorf("deleting the record of session %s: %w", s.o.Name, err)
	}
	if s.stopAsked.Load() {
		// The process that asked waits for this report, and deletes the
		// Lease when it has it.
		s.lease.report(ctx, r, 5*time.Second)
	}
	if err := s.lease.release(ctx); err != nil {
		return r, fmt.Errorf("deleting the lease of session %s: %w", s.o.Name, err)
	}
	removeSystemNamespace(ctx, s.c.Kube())
	return r, nil
}

func (s *Session) stopHeartbeat() {
	s.hbCancel()
	<-s.hbDone
}

// forget deletes a restored session's record, then its Lease.
func forget(ctx context.Context, st *store, l *lease) error {
	if err := st.remove(ctx); err != nil {
		return fmt.Errorf("deleting the record of session %s: %w", st.name, err)
	}
	if err := l.release(ctx); err != nil {
		return fmt.Errorf("deleting the lease of session %s: %w", st.name, err)
	}
	return nil
}

// StopOptions say how to end a session from another process.
type StopOptions struct {
	// Holder is who asks (user@host); the default is this process's.
	Holder string
	// Wait is how long a live session gets to restore itself before this
	// process does it; the default is 30 seconds.
	Wait time.Duration
	// Poll is how often to look; the default is 250 ms.
	Poll time.Duration
}

// StopSession ends a session from another process. A live session is
// asked to stop and restore itself (it sees the request at its next
// heartbeat); a stale one, or one that does not answer within Wait, is
// restored here from its record.
func StopSession(ctx context.Context, c *cluster.Client, name string, o StopOptions) (*Restoration, error) {
	if o.Holder == "" {
		o.Holder = DefaultHolder()
	}
	if o.Wait <= 0 {
		o.Wait = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	in, err := Get(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if in.State != StateStale {
		// The holder renews the Lease every heartbeat: an update that
		// loses to a renewal is made again on the renewed Lease, or the
		// session would never hear the request.
		err := retry.RetryOnConflict(wait.Backoff{Steps: 20, Duration: 20 * time.Millisecond, Factor: 1.2, Jitter: 0.5}, func() error {
			var l coordinationv1.Lease
			if err := c.Kube().Get(ctx, client.ObjectKeyFromObject(in.lease), &l); err != nil {
				return err
			}
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[annotationStop] = o.Holder
			return c.Kube().Update(ctx, &l)
		})
		if apierrors.IsNotFound(err) {
			return &Restoration{Session: name, BySession: true}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("asking session %s to stop: %w", name, err)
		}
		deadline := time.Now().Add(o.Wait)
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(o.Poll):
			}
			in, err = Get(ctx, c, name)
			if errors.Is(err, ErrNoSession) {
				// It restored itself, and left no report (a Sluice of
				// before reports).
				return &Restoration{Session: name, BySession: true}, nil
			}
			if err != nil {
				return nil, err
			}
			if in.State == StateEnded {
				r := &Restoration{}
				if err := json.Unmarshal([]byte(in.lease.Annotations[annotationRestored]), r); err != nil {
					r = &Restoration{Session: name}
				}
				r.BySession = true
				if err := c.Kube().Delete(ctx, in.lease); err != nil && !apierrors.IsNotFound(err) {
					return r, fmt.Errorf("deleting the lease of session %s: %w", name, err)
				}
				removeSystemNamespace(ctx, c.Kube())
				return r, nil
			}
			if in.State == StateStale {
				break
			}
		}
	}
	return restoreHere(ctx, c, in, o.Holder)
}

// restoreHere takes a session over and restores it from its record.
func restoreHere(ctx context.Context, c *cluster.Client, in Info, holderName string) (*Restoration, error) {
	l, err := takeLease(ctx, c.Kube(), in.lease, fmt.Sprintf("%s (restoring)", holderName))
	if err != nil {
		return nil, err
	}
	st := &store{c: c.Kube(), name: in.Name}
	rec, err := st.read(ctx)
	if errors.Is(err, ErrNoRecord) {
		// It never got as far as touching anything.
		if err := l.release(ctx); err != nil {
			return nil, err
		}
		removeSystemNamespace(ctx, c.Kube())
		return &Restoration{Session: in.Name}, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := restore(ctx, c, rec)
	if err != nil {
		return r, err
	}
	if err := forget(ctx, st, l); err != nil {
		return r, err
	}
	removeSystemNamespace(ctx, c.Kube())
	return r, nil
}

// Cleanup restores every stale session (its holder stopped renewing: the
// process was killed, the laptop closed), or every session with all.
func Cleanup(ctx context.Context, c *cluster.Client, all bool, o StopOptions) ([]*Restoration, error) {
	infos, err := List(ctx, c)
	if err != nil {
		return nil, err
	}
	if o.Holder == "" {
		o.Holder = DefaultHolder()
	}
	var out []*Restoration
	var errs []error
	for _, in := range infos {
		var r *Restoration
		switch {
		case in.State == StateStale:
			r, err = restoreHere(ctx, c, in, o.Holder)
		case all:
			r, err = StopSession(ctx, c, in.Name, o)
		default:
			continue
		}
		if r != nil {
			out = append(out, r)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
