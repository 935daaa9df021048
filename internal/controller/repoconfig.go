package controller

import (
	"context"
	"errors"
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
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/repoconfig"
	"sluice.dev/sluice/internal/source"
)

// RepoConfigReconciler reconciles RepoConfigs: the Images and
// ManifestSyncs found in a repository, built and hydrated as `sluice
// hydrate` does with the RepoConfig's file, each with the Secrets the
// RepoConfig lends for where it sends them (spec.credentials), never one
// it names itself.
type RepoConfigReconciler struct {
	client.Client
	secrets       *credentials.Secrets
	engines       *engines
	base          hydrate.Options
	events        events.EventRecorder
	log           *slog.Logger
	allowLocal    bool
	allowBuilders bool
	now           func() time.Time

	attempts *attempts
}

// +kubebuilder:rbac:groups=sluice.dev,resources=repoconfigs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=sluice.dev,resources=repoconfigs/status,verbs=get;update;patch

// Reconcile reads the RepoConfig's repository and reconciles what it finds.
func (r *RepoConfigReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &v1alpha1.RepoConfig{}
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
	rc, err := r.toConfig(obj)
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
	ctx = source.ContextWithMaxAge(ctx, interval)
	ctx = registry.ContextWithMaxAge(ctx, interval)
	asked, ok := requestedAt(obj, &st.ReconcileStatus, r.now())
	if t := r.attempts.since(client.ObjectKeyFromObject(obj), asked, ok); !t.IsZero() {
		ctx = source.ContextWithNotBefore(ctx, t)
		ctx = registry.ContextWithNotBefore(ctx, t)
	}
	rep, err := r.reconcile(egress.WithPolicy(ctx, r.engines.egress), obj, rc)
	if err == nil {
		err = rep.Err()
	}
	key := client.ObjectKeyFromObject(obj)
	failures := r.attempts.record(key, err != nil)
	if err != nil && ctx.Err() != nil {
		return ctrl.Result{}, ctx.Err()
	}
	after, ready, reason, msg := interval, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, ""
	if err != nil {
		after, ready, reason, msg = retryDelay(failures, interval), metav1.ConditionFalse, v1alpha1.ReasonFailed, oneLine(err)
		r.log.Error("reconciling failed", "repoconfig", req.String(), "error", msg, "retry", after)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	}
	err = patchStatus(ctx, r.Client, obj, func() {
		if rep == nil {
			settle(obj, &st.ReconcileStatus, ready, reason, msg)
			return
		}
		if len(rep.Sources) > 0 {
			st.Source = source.Redact(rep.Sources[0])
		}
		st.ManifestSyncs, st.Images = nil, nil
		committed := 0
		for _, s := range rep.Syncs {
			st.ManifestSyncs = append(st.ManifestSyncs, v1alpha1.FoundResult{Name: s.Name, Result: string(s.Result), Commit: s.Commit, Error: s.Error})
			if s.Result == hydrate.Committed {
				committed++
			}
		}
		built := 0
		for _, i := range rep.Images {
			result := "tagged"
			if i.Built {
				result, built = "built", built+1
			}
			if i.Err != nil {
				result = "failed"
			}
			st.Images = append(st.Images, v1alpha1.FoundResult{Name: i.Name, Result: result, Digest: i.Digest, Error: i.Error})
		}
		if msg == "" {
			msg = fmt.Sprintf("%d ManifestSyncs (%d committed), %d Images (%d built)", len(rep.Syncs), committed, len(rep.Images), built)
			if committed+built > 0 {
				r.events.Eventf(obj, nil, corev1.EventTypeNormal, "Reconciled", "Reconcile", "%s", msg)
			}
		}
		settle(obj, &st.ReconcileStatus, ready, reason, msg)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// reconcile loads what the repository holds and builds and hydrates it.
func (r *RepoConfigReconciler) reconcile(ctx context.Context, obj *v1alpha1.RepoConfig, rc config.RepoConfig) (*repoconfig.Report, error) {
	own, err := r.secrets.Git(ctx, obj.Namespace, rc.Spec.SecretRef)
	if err != nil {
		return nil, err
	}
	// Finding is bounded as a render is: a repository's globs and files
	// are that repository's word.
	timeout := r.base.Limits.WithDefaults().Timeout
	fctx, cancel := context.WithTimeout(ctx, timeout)
	loaded, err := repoconfig.LoadSet(fctx, r.engines.cache, &config.Set{RepoConfigs: []config.RepoConfig{rc}}, override.Set{}, func(config.RepoConfig) *source.Credentials { return own })
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("finding the resources of %s took longer than %s (%s)", source.Redact(rc.Spec.Repo), timeout, render.FlagTimeout)
	}
	if err != nil {
		return nil, err
	}
	// What was found is of this namespace (its provenance says so), and
	// gets what the RepoConfig lends, by where it is sent.
	lender := r.secrets.Lender(obj.Namespace, rc.Spec.Credentials)
	kc, id, err := lender.Registry(ctx)
	if err != nil {
		return nil, fmt.Errorf("spec.credentials.registries: %w", err)
	}
	reg := r.engines.registry(id, kc)
	type syncCreds struct {
		src, dst *source.Credentials
	}
	syncs := map[*v1alpha1.ManifestSync]syncCreds{}
	for i := range loaded.Set.ManifestSyncs {
		ms := loaded.Set.ManifestSyncs[i]
		ms.Namespace = obj.Namespace
		var c syncCreds
		if c.src, err = lender.Git(ctx, ms.Spec.Source.Repo); err == nil {
			c.dst, err = lender.Git(ctx, ms.Spec.Destination.Repo)
		}
		if err != nil {
			return nil, fmt.Errorf("ManifestSync %s: spec.credentials: %w", ms.Name, err)
		}
		syncs[ms.ManifestSync] = c
	}
	images := map[*v1alpha1.Image][]*source.Credentials{}
	for _, img := range loaded.Set.Images {
		img.Namespace = obj.Namespace
		for _, s := range img.Spec.Source {
			c, err := lender.Git(ctx, s.Repo)
			if err != nil {
				return nil, fmt.Errorf("Image %s: spec.credentials: %w", img.Name, err)
			}
			images[img.Image] = append(images[img.Image], c)
		}
	}
	h := r.base
	h.Credentials = func(ms config.ManifestSync) (*source.Credentials, *source.Credentials) {
		c := syncs[ms.ManifestSync]
		return c.src, c.dst
	}
	h.Registry, h.Charts = reg.reg, reg.charts
	// A found Image runs its builder only where both the controller
	// (--allow-builders) and its RepoConfig (spec.allowBuilders) allow it.
	b := &build.Builder{Cache: r.engines.cache, Registry: reg.reg, Jobs: 2,
		Credentials: func(img config.Image, i int) *source.Credentials { return images[img.Image][i] }}
	return repoconfig.Reconcile(ctx, loaded, repoconfig.Options{Hydrate: h, Builder: b})
}

// toConfig is the RepoConfig as the engines take it, refusing what a
// controller must not read.
func (r *RepoConfigReconciler) toConfig(obj *v1alpha1.RepoConfig) (config.RepoConfig, error) {
	c := obj.DeepCopy()
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		return config.RepoConfig{}, errs.ToAggregate()
	}
	if !r.allowBuilders {
		c.Spec.AllowBuilders = false // a resource alone cannot run commands in the controller
	}
	if err := config.RemoteOnly("spec.repo", c.Spec.Repo, r.allowLocal); err != nil {
		return config.RepoConfig{}, err
	}
	for i, o := range c.Spec.Overrides.Repos {
		if err := config.RemoteOnly(fmt.Sprintf("spec.overrides.repos[%d].to", i), o.To, r.allowLocal); err != nil {
			return config.RepoConfig{}, err
		}
	}
	return config.RepoConfig{RepoConfig: c, Origin: config.Origin{File: "RepoConfig " + obj.Namespace + "/" + obj.Name}}, nil
}
