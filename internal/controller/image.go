package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/build"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/credentials"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
)

// ImageReconciler builds Images: when their sources' files (or base)
// changed, a new image; otherwise the one built from the same inputs,
// found with one request and tagged.
type ImageReconciler struct {
	client.Client
	secrets       *credentials.Secrets
	engines       *engines
	events        events.EventRecorder
	log           *slog.Logger
	allowLocal    bool
	allowBuilders bool
	now           func() time.Time

	attempts *attempts
}

// +kubebuilder:rbac:groups=sluice.dev,resources=images,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=sluice.dev,resources=images/status,verbs=get;update;patch

// Reconcile builds one Image.
func (r *ImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &v1alpha1.Image{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	st := &obj.Status
	if obj.Spec.Suspend {
		// A request made while suspended is kept for the resume.
		asked, ok := requestedAt(obj, &st.ReconcileStatus, r.now())
		r.attempts.since(req.NamespacedName, asked, ok)
		return ctrl.Result{}, patchStatus(ctx, r.Client, obj, func() {
			if st.ObservedGeneration != obj.Generation {
				settle(obj, &st.ReconcileStatus, metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended: spec.suspend is set")
			}
			// A request is seen, and nothing done: said, so that whoever
			// asked is not left waiting.
			st.LastHandledReconcileAt = obj.Annotations[v1alpha1.ReconcileRequestAnnotation]
		})
	}
	interval := intervalOf(obj.Spec.Interval)
	img, err := r.toConfig(obj)
	if err != nil {
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalid, "Validate", "%s", err)
		return ctrl.Result{}, patchStatus(ctx, r.Client, obj, func() {
			settle(obj, &st.ReconcileStatus, metav1.ConditionFalse, v1alpha1.ReasonInvalid, err.Error())
		})
	}
	if st.ObservedGeneration != obj.Generation {
		if err := patchStatus(ctx, r.Client, obj, func() { progressing(obj, &st.ReconcileStatus) }); err != nil {
			return ctrl.Result{}, err
		}
	}
	res, err := r.build(ctx, obj, img, interval)
	key := client.ObjectKeyFromObject(obj)
	failures := r.attempts.record(key, err != nil)
	if err != nil {
		if ctx.Err() != nil {
			return ctrl.Result{}, ctx.Err()
		}
		msg := oneLine(err)
		after := retryDelay(failures, interval)
		r.log.Error("building failed", "image", req.String(), "error", msg, "retry", after)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.ReasonFailed, "Build", "%s", msg)
		return ctrl.Result{RequeueAfter: after}, patchStatus(ctx, r.Client, obj, func() {
			settle(obj, &st.ReconcileStatus, metav1.ConditionFalse, v1alpha1.ReasonFailed, msg)
		})
	}
	prev := st.LastBuild
	msg := fmt.Sprintf("%s@%s", res.Image, res.Digest)
	switch {
	case res.Built:
		msg = "built " + msg
	case prev == nil || prev.Digest != res.Digest:
		msg = "found " + msg + " built from the same inputs"
	default:
		msg = "up to date: " + msg
	}
	if prev == nil || prev.Digest != res.Digest {
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, "Built", "Build", "%s, tagged %v", msg, res.Tags)
	}
	return ctrl.Result{RequeueAfter: interval}, patchStatus(ctx, r.Client, obj, func() {
		settle(obj, &st.ReconcileStatus, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, msg)
		st.LastBuild = &v1alpha1.ImageBuild{Digest: res.Digest, Tags: res.Tags, Inputs: res.Inputs, Source: source.Redact(res.Source), Built: res.Built}
		if prev != nil && prev.Inputs == res.Inputs {
			st.LastBuild.Built = prev.Built // a look-up of the same inputs is not news
		}
	})
}

// build runs the builder with the Image's own Secrets.
func (r *ImageReconciler) build(ctx context.Context, obj *v1alpha1.Image, img config.Image, interval time.Duration) (build.Result, error) {
	creds := make([]*source.Credentials, len(img.Spec.Source))
	for i, s := range img.Spec.Source {
		c, err := r.secrets.Git(ctx, obj.Namespace, s.SecretRef)
		if err != nil {
			return build.Result{}, err
		}
		creds[i] = c
	}
	kc, id, err := r.secrets.Registry(ctx, obj.Namespace, img.Spec.RegistrySecretRef)
	if err != nil {
		return build.Result{}, err
	}
	b := &build.Builder{Cache: r.engines.cache, Registry: r.engines.registry(id, kc).reg, Jobs: 1, AllowBuilders: r.allowBuilders,
		Credentials: func(_ config.Image, i int) *source.Credentials { return creds[i] }}
	ctx = source.ContextWithMaxAge(ctx, interval)
	ctx = registry.ContextWithMaxAge(ctx, interval)
	asked, ok := requestedAt(obj, &obj.Status.ReconcileStatus, r.now())
	if t := r.attempts.since(client.ObjectKeyFromObject(obj), asked, ok); !t.IsZero() {
		ctx = source.ContextWithNotBefore(ctx, t)
		ctx = registry.ContextWithNotBefore(ctx, t)
	}
	res := b.Build(ctx, []config.Image{img}, build.Options{})[0]
	return res, res.Err
}

// toConfig is the Image as the builder takes it: defaulted and validated
// as a file would be, refusing local sources and, unless the controller
// allows them, external builders.
func (r *ImageReconciler) toConfig(obj *v1alpha1.Image) (config.Image, error) {
	c := obj.DeepCopy()
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		return config.Image{}, errs.ToAggregate()
	}
	for i, s := range c.Spec.Source {
		if err := config.RemoteOnly(fmt.Sprintf("spec.source[%d].repo", i), s.Repo, r.allowLocal); err != nil {
			return config.Image{}, err
		}
	}
	if c.Spec.Builder != nil && !r.allowBuilders {
		return config.Image{}, fmt.Errorf("spec.builder would run %q inside the controller: it runs external builders only when started with --allow-builders", c.Spec.Builder.Command)
	}
	return config.Image{Image: c}, nil
}
