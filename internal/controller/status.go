package controller

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
)

// defaultInterval is a resource's when it names none (the CRD defaults
// it too).
const defaultInterval = 5 * time.Minute

func intervalOf(d *metav1.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return defaultInterval
	}
	return d.Duration
}

// requestedAt is the moment a person or a webhook asked for a reconcile
// (the annotation's value: RFC 3339 or Unix seconds, as `date +%s` gives),
// when it is new: that reconcile reads what the remotes hold since then,
// however young what the controller remembers. A value that is no time
// at all asks for now. A value in whole seconds means the end of its
// second: a clone taken earlier in that second may predate the push the
// person saw. Never later than now: a clock ahead of this one does not
// make every reconcile fetch again.
func requestedAt(obj metav1.Object, st *v1alpha1.ReconcileStatus, now time.Time) (time.Time, bool) {
	v, ok := obj.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]
	if !ok || v == st.LastHandledReconcileAt {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err == nil && !strings.Contains(v, ".") {
		t = t.Add(time.Second - 1)
	}
	if err != nil {
		if secs, serr := strconv.ParseInt(v, 10, 64); serr == nil {
			t, err = time.Unix(secs, 0).Add(time.Second-1), nil
		}
	}
	if err != nil || t.After(now) {
		t = now
	}
	return t, true
}

// settle records the outcome of a reconcile of the current generation:
// Ready with reason and message, Reconciling off, Stalled when the spec
// cannot succeed as it is.
func settle(obj metav1.Object, st *v1alpha1.ReconcileStatus, ready metav1.ConditionStatus, reason, msg string) {
	st.ObservedGeneration = obj.GetGeneration()
	st.LastHandledReconcileAt = obj.GetAnnotations()[v1alpha1.ReconcileRequestAnnotation]
	st.LastError = ""
	if ready != metav1.ConditionTrue && reason != v1alpha1.ReasonLocked && reason != v1alpha1.ReasonSuspended {
		st.LastError = msg
	}
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()})
	}
	set(v1alpha1.ConditionReady, ready, reason, msg)
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
	if reason == v1alpha1.ReasonInvalid {
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
	}
}

// progressing marks a new generation as being reconciled; false when the
// status already says so.
func progressing(obj metav1.Object, st *v1alpha1.ReconcileStatus) bool {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReconciling); c != nil && c.ObservedGeneration == obj.GetGeneration() {
		return false
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonProgressing, Message: "reconciling a new generation", ObservedGeneration: obj.GetGeneration()})
	if meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady) == nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionUnknown,
			Reason: v1alpha1.ReasonProgressing, Message: "reconciling", ObservedGeneration: obj.GetGeneration()})
	}
	return true
}

// retryDelay is how long a resource that failed n times in a row waits
// before it is tried again: doubling from 5s, never past its interval.
func retryDelay(n int, interval time.Duration) time.Duration {
	d := 5 * time.Second
	for i := 1; i < n && d < interval; i++ {
		d *= 2
	}
	return min(d, interval)
}

// attempts remembers, per resource, its failures in a row (for the
// backoff) and the moment a reconcile request asked for, until a
// reconcile succeeds: the retries of a request read what the remotes hold
// since it too.
type attempts struct {
	mu       sync.Mutex
	failures map[types.NamespacedName]int
	fresh    map[types.NamespacedName]request
	// pending are the requests asked in this process (ask) that no
	// reconcile has taken yet: a reconcile that started before one came
	// does not satisfy it.
	pending map[types.NamespacedName]bool
}

// request is a reconcile request: when, and what for ("" for
// everything, else v1alpha1.RequestForSource or RequestForImages).
type request struct {
	at   time.Time
	what string
}

func newAttempts() *attempts {
	return &attempts{failures: map[types.NamespacedName]int{}, fresh: map[types.NamespacedName]request{}, pending: map[types.NamespacedName]bool{}}
}

// ask records a reconcile request made in this process (a webhook
// received by the leader), for the reconcile it queues.
func (a *attempts) ask(key types.NamespacedName, at time.Time, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.fresh[key]; ok && prev.what != what {
		what = ""
	}
	a.fresh[key] = request{at, what}
	a.pending[key] = true
}

// since is the moment a reconcile must read the remotes since: a new
// request's (asked), or the last one not yet satisfied; zero for none.
func (a *attempts) since(key types.NamespacedName, t time.Time, asked bool) time.Time {
	at, _ := a.sinceFor(key, t, asked, "")
	return at
}

// sinceFor is since, with what the request is for; a new request while
// one of another kind is not yet satisfied is for both.
func (a *attempts) sinceFor(key types.NamespacedName, t time.Time, asked bool, what string) (time.Time, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if asked {
		if prev, ok := a.fresh[key]; ok && prev.what != what {
			what = ""
		}
		a.fresh[key] = request{t, what}
	}
	delete(a.pending, key) // this reconcile takes it
	r := a.fresh[key]
	return r.at, r.what
}

// requestedFor is what a resource's reconcile request is for
// (v1alpha1.ReconcileRequestForAnnotation); "" for everything.
func requestedFor(obj metav1.Object) string {
	switch v := obj.GetAnnotations()[v1alpha1.ReconcileRequestForAnnotation]; v {
	case v1alpha1.RequestForSource, v1alpha1.RequestForImages:
		return v
	}
	return ""
}

// record notes a reconcile's outcome and returns the failures in a row.
func (a *attempts) record(key types.NamespacedName, failed bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !failed {
		delete(a.failures, key)
		if !a.pending[key] {
			delete(a.fresh, key)
		}
		return 0
	}
	a.failures[key]++
	return a.failures[key]
}
