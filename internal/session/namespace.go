package session

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// annotationInUse is bumped on the system namespace by every session that
// starts in it: a removal racing with it fails its precondition.
const annotationInUse = "sluice.dev/session-started"

// ensureSystemNamespace makes sure SystemNamespace exists for a session
// to start in, creating it (labelled as Sluice's, so that the last
// session out removes it) or marking it in use; one being deleted is
// waited for and created again.
func ensureSystemNamespace(ctx context.Context, kube client.Client) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace, Labels: map[string]string{labelManagedBy: "sluice"}}}
		err := kube.Create(ctx, ns)
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", SystemNamespace, err)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotationInUse, time.Now().UTC().Format(time.RFC3339Nano))
		err = kube.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(patch)))
		switch {
		case apierrors.IsNotFound(err):
			continue // removed meanwhile: create it
		case err != nil:
			return fmt.Errorf("namespace %s: %w", SystemNamespace, err)
		case ns.DeletionTimestamp == nil:
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s has been terminating since %s: is the cluster's namespace controller (kube-controller-manager) running?", SystemNamespace, ns.DeletionTimestamp.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// removeSystemNamespace deletes SystemNamespace after the last session,
// when a session created it and nothing else lives there (no session's
// Lease or record, nor what a person or the controller put there). A
// session starting meanwhile marks the namespace, which fails the
// deletion's precondition. It does nothing on any doubt.
func removeSystemNamespace(ctx context.Context, kube client.Client) {
	ns := &corev1.Namespace{}
	if err := kube.Get(ctx, client.ObjectKey{Name: SystemNamespace}, ns); err != nil {
		return
	}
	if ns.Labels[labelManagedBy] != "sluice" || ns.DeletionTimestamp != nil {
		return
	}
	rv, uid := ns.ResourceVersion, ns.UID
	lists := []struct {
		list client.ObjectList
		own  func(name string) bool // what the cluster itself puts in every namespace
	}{
		{&coordinationv1.LeaseList{}, nil},
		{&corev1.SecretList{}, nil},
		{&corev1.ConfigMapList{}, func(n string) bool { return n == "kube-root-ca.crt" }},
		{&corev1.ServiceAccountList{}, func(n string) bool { return n == "default" }},
		{&corev1.ServiceList{}, nil},
		{&corev1.PodList{}, nil},
		{&appsv1.DeploymentList{}, nil},
		{&appsv1.StatefulSetList{}, nil},
	}
	for _, l := range lists {
		if err := kube.List(ctx, l.list, client.InNamespace(SystemNamespace)); err != nil {
			return
		}
		items, err := names(l.list)
		if err != nil {
			return
		}
		for _, name := range items {
			if l.own == nil || !l.own(name) {
				return
			}
		}
	}
	kube.Delete(ctx, ns, client.Preconditions{ResourceVersion: &rv, UID: &uid})
}

// names are the names of a list's items.
func names(l client.ObjectList) ([]string, error) {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		a, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, a.GetName())
	}
	return out, nil
}
