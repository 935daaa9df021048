package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A push goes only while the Lease, as the API server holds it, is this
// replica's and unexpired.
func TestAPushAsksTheLeaseItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := time.Now()
	l, err := newLeader(cp.Config, e.ns, "lease-"+e.shard, 15*time.Second, 10*time.Second, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lease-" + e.shard}}
	for _, tc := range []struct {
		name    string
		holder  string
		renewed time.Time
		want    string // "" for nil
	}{
		{"no Lease at all", "", time.Time{}, "cannot tell whether this replica still leads"},
		{"held by this replica", l.lock.Identity(), now.Add(-14 * time.Second), ""},
		{"held by another", "other_1234", now.Add(-time.Second), "no longer leads: Lease " + e.ns + "/lease-" + e.shard + " is held by other_1234"},
		{"released", "", now.Add(-time.Second), "held by nobody"},
		{"this replica's, run out", l.lock.Identity(), now.Add(-16 * time.Second), "ran out at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.renewed.IsZero() {
				lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tc.holder), LeaseDurationSeconds: ptr.To[int32](15),
					RenewTime: &metav1.MicroTime{Time: tc.renewed}, AcquireTime: &metav1.MicroTime{Time: tc.renewed}}
				var err error
				if lease.ResourceVersion == "" {
					err = e.c.Create(ctx, lease)
				} else {
					err = e.c.Update(ctx, lease)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			err := l.stillLeads(ctx)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// A replica steps down (clears the Lease) only while the Lease, as it has
// just read it, names it: a stale leader stopping does not clear the Lease
// another replica has taken.
func TestAReplicaReleasesOnlyItsOwnLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := newLeader(cp.Config, e.ns, "lease-"+e.shard, 15*time.Second, 10*time.Second, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "lease-" + e.shard},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other_1234"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: time.Now()}, AcquireTime: &metav1.MicroTime{Time: time.Now()}}}
	if err := e.c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	release := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: metav1.Now(), AcquireTime: metav1.Now()}
	holder := func() string {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	if _, _, err := l.lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.lock.Update(ctx, release); err == nil || !strings.Contains(err.Error(), "other_1234 holds it") {
		t.Fatalf("releasing another replica's Lease: %v", err)
	}
	if h := holder(); h != "other_1234" {
		t.Fatalf("the Lease is held by %q after the refused release", h)
	}

	lease.Spec.HolderIdentity = ptr.To(l.lock.Identity())
	if err := e.c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.lock.Update(ctx, release); err != nil {
		t.Fatalf("releasing its own Lease: %v", err)
	}
	if h := holder(); h != "" {
		t.Fatalf("the Lease is held by %q after its holder released it", h)
	}
}
