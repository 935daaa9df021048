package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
