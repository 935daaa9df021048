package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/source"
)

// lockRow is a folder a takeover holds.
type lockRow struct {
	syncRow
	Lock    v1alpha1.Takeover
	Since   time.Time
	Until   time.Time
	Expired bool
}

type takeoversPage struct {
	Title, Nav string
	Locks      []lockRow
	Flash      *flash
	CSRF       string
	ReadOnly   bool
	Hours      []int
	Err        string
}

// takeovers lists the folders takeovers lock, as the syncs' statuses say.
func (s *Server) takeovers(w http.ResponseWriter, r *http.Request) {
	u := userOf(r.Context())
	p := takeoversPage{Title: "Takeovers", Nav: "takeovers", CSRF: s.csrfToken(u), ReadOnly: s.o.ReadOnly || s.o.Preview == nil,
		Flash: s.flashes.take(u, r.URL.Query().Get("done")), Hours: []int{1, 2, 4, 8, 12}}
	visible, err := s.visible(r.Context(), s.o.Namespace)
	if err != nil {
		p.Err = actionError(err)
	}
	var list v1alpha1.ManifestSyncList
	if err := s.reader.List(r.Context(), &list, client.InNamespace(s.o.Namespace)); err != nil {
		p.Err = listError(err)
	}
	for i := range list.Items {
		ms := &list.Items[i]
		if ms.Status.Lock == nil || !visible(ms.Namespace) {
			continue
		}
		row := lockRow{syncRow: rowOf(ms), Lock: *ms.Status.Lock}
		row.Until, _ = row.Lock.ExpiresAt()
		row.Expired = !row.Lock.Holds(time.Now())
		if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == v1alpha1.ReasonLocked {
			row.Since = c.LastTransitionTime.Time
		}
		p.Locks = append(p.Locks, row)
	}
	slices.SortFunc(p.Locks, func(a, b lockRow) int {
		return cmp.Or(cmp.Compare(a.Lock.Owner, b.Lock.Owner), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	s.render(w, r, "takeovers.html", p)
}

// lockAction reads the sync an action on its lock names, checks the
// person may change it, and runs f; the sync is then asked to reconcile,
// so its status shows the lock as it now is.
func (s *Server) lockAction(r *http.Request, f func(ms *v1alpha1.ManifestSync, c client.Client, owner string) (string, error)) (string, error) {
	ns, name, owner := r.PathValue("namespace"), r.PathValue("name"), r.PostFormValue("owner")
	if s.o.Preview == nil {
		return "", fmt.Errorf("this dashboard reads no git repository")
	}
	if err := s.mayAct(r.Context(), "patch", "sluice.dev", "manifestsyncs", ns, name); err != nil {
		return "", err
	}
	c, err := s.clients.of(userOf(r.Context()))
	if err != nil {
		return "", err
	}
	var ms v1alpha1.ManifestSync
	if err := s.reader.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &ms); err != nil {
		return "", err
	}
	if owner == "" {
		return "", fmt.Errorf("no owner named: reload the page")
	}
	msg, err := f(&ms, c.Kube(), owner)
	if err != nil {
		return "", err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.ReconcileRequestAnnotation, strconv.FormatInt(time.Now().UnixNano(), 10))
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ManifestSync"))
	if err := c.Kube().Patch(r.Context(), obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return msg + " (asking the controller to reconcile failed: " + err.Error() + ")", nil
	}
	return msg, nil
}

func (s *Server) releaseLock(r *http.Request) (string, error) {
	return s.lockAction(r, func(ms *v1alpha1.ManifestSync, c client.Client, owner string) (string, error) {
		ctx := source.ContextWithNotBefore(r.Context(), time.Now())
		res, err := s.o.Preview.Release(ctx, c, ms, owner)
		if err != nil {
			return "", fmt.Errorf("releasing %s's lock on %s/%s: %w", owner, ms.Namespace, ms.Name, err)
		}
		if res.Result == "locked" {
			return "", fmt.Errorf("%s/%s stays locked: %s", ms.Namespace, ms.Name, res.Error)
		}
		return fmt.Sprintf("released %s's lock on %s/%s: %s %s", owner, ms.Namespace, ms.Name, res.Result, short(res.Commit)), nil
	})
}

func (s *Server) extendLock(r *http.Request) (string, error) {
	hours, err := strconv.Atoi(r.PostFormValue("hours"))
	if err != nil || hours < 1 {
		return "", fmt.Errorf("extend by how many hours? (got %q)", r.PostFormValue("hours"))
	}
	return s.lockAction(r, func(ms *v1alpha1.ManifestSync, c client.Client, owner string) (string, error) {
		from := time.Now()
		if l := ms.Status.Lock; l != nil {
			if t, ok := l.ExpiresAt(); ok && t.After(from) {
				from = t
			}
		}
		until := from.Add(time.Duration(hours) * time.Hour)
		if most := time.Now().Add(preview.MaxLock); until.After(most) {
			until = most
		}
		until = until.Truncate(time.Second)
		ctx := source.ContextWithNotBefore(r.Context(), time.Now())
		commit, err := s.o.Preview.Extend(ctx, c, ms, owner, until)
		if err != nil {
			return "", fmt.Errorf("extending %s's lock on %s/%s: %w", owner, ms.Namespace, ms.Name, err)
		}
		return fmt.Sprintf("extended %s's lock on %s/%s until %s (commit %s)", owner, ms.Namespace, ms.Name, until.UTC().Format(time.RFC3339), short(commit)), nil
	})
}
