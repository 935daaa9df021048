package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/credentials"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/source"
)

// pruneFinalizer holds a ManifestSync with spec.prune until its folder is
// removed from the destination branch.
const pruneFinalizer = "sluice.dev/prune"

// ManifestSyncReconciler hydrates ManifestSyncs.
type ManifestSyncReconciler struct {
	client.Client
	secrets    *credentials.Secrets
	engines    *engines
	batch      *batcher
	events     events.EventRecorder
	log        *slog.Logger
	allowLocal bool
	now        func() time.Time

	attempts *attempts
}

// +kubebuilder:rbac:groups=sluice.dev,resources=manifestsyncs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sluice.dev,resources=manifestsyncs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sluice.dev,resources=manifestsyncs/finalizers,verbs=update

// Reconcile hydrates one ManifestSync: through the batch of its
// destination branch, which checks its source and tags (shared with every
// sync that reads them, at most once per interval) and renders and
// commits it only when they changed.
func (r *ManifestSyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &v1alpha1.ManifestSync{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := r.log.With("manifestsync", req.String())
	if !obj.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, obj, log)
	}
	// The finalizer is there exactly while spec.prune asks for it.
	if obj.Spec.Prune != controllerutil.ContainsFinalizer(obj, pruneFinalizer) {
		orig := obj.DeepCopy()
		if obj.Spec.Prune {
			controllerutil.AddFinalizer(obj, pruneFinalizer)
		} else {
			controllerutil.RemoveFinalizer(obj, pruneFinalizer)
		}
		if err := r.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
	}
	if obj.Spec.Suspend {
		log.Debug("suspended")
		// A request made while suspended is kept for the resume: its first
		// reconcile reads what the remotes hold since the request.
		asked, ok := requestedAt(obj, &obj.Status.ReconcileStatus, r.now())
		r.attempts.since(req.NamespacedName, asked, ok)
		return ctrl.Result{}, r.patchStatus(ctx, obj, func(st *v1alpha1.ManifestSyncStatus) {
			if st.ObservedGeneration != obj.Generation {
				settle(obj, &st.ReconcileStatus, metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended: spec.suspend is set")
			}
			// A request is seen, and nothing done: said, so that whoever
			// asked is not left waiting.
			st.LastHandledReconcileAt = obj.Annotations[v1alpha1.ReconcileRequestAnnotation]
		})
	}
	interval := intervalOf(obj.Spec.Interval)
	ms, err := r.toConfig(obj)
	if err != nil {
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalid, "Validate", "%s", err)
		return ctrl.Result{}, r.patchStatus(ctx, obj, func(st *v1alpha1.ManifestSyncStatus) {
			settle(obj, &st.ReconcileStatus, metav1.ConditionFalse, v1alpha1.ReasonInvalid, err.Error())
		})
	}
	if obj.Status.ObservedGeneration != obj.Generation {
		if err := r.patchStatus(ctx, obj, func(st *v1alpha1.ManifestSyncStatus) { progressing(obj, &st.ReconcileStatus) }); err != nil {
			return ctrl.Result{}, err
		}
	}
	j := &job{ms: ms}
	asked, ok := requestedAt(obj, &obj.Status.ReconcileStatus, r.now())
	j.notBefore, j.requestFor = r.attempts.sinceFor(req.NamespacedName, asked, ok, requestedFor(obj))
	res, err := r.credentials(ctx, obj, j)
	if err == nil {
		res, err = r.batch.submit(ctx, j)
		if err == nil {
			err = res.Err
		}
	}
	return r.record(ctx, obj, res, err, interval, log)
}

// credentials reads the Secrets the sync names into j.
func (r *ManifestSyncReconciler) credentials(ctx context.Context, obj *v1alpha1.ManifestSync, j *job) (hydrate.Result, error) {
	var err error
	spec := j.ms.Spec
	if j.src, err = r.secrets.Git(ctx, obj.Namespace, spec.Source.SecretRef); err != nil {
		return hydrate.Result{}, err
	}
	if spec.Destination.IsOCI() {
		if err := r.ociCredentials(ctx, obj, j); err != nil {
			return hydrate.Result{}, err
		}
	} else {
		if j.dst, err = r.secrets.Git(ctx, obj.Namespace, spec.DestinationSecretRef()); err != nil {
			return hydrate.Result{}, err
		}
		if j.signer, err = r.secrets.Signer(ctx, obj.Namespace, spec.Destination.Signing); err != nil {
			return hydrate.Result{}, err
		}
	}
	if j.verifier, err = r.secrets.Verifier(ctx, obj.Namespace, spec.Source.Verify); err != nil {
		return hydrate.Result{}, &hydrate.VerificationError{What: "its trusted keys", Err: err}
	}
	if j.imagePolicies, err = r.secrets.ImagePolicies(ctx, obj.Namespace, spec.Images); err != nil {
		return hydrate.Result{}, err
	}
	kc, id, err := r.secrets.Registry(ctx, obj.Namespace, spec.RegistrySecretRef)
	if err != nil {
		return hydrate.Result{}, err
	}
	j.reg = r.engines.registry(id, kc)
	return hydrate.Result{}, nil
}

// ociCredentials reads what an OCI destination is pushed and signed with:
// the registry's write credentials (a dockerconfigjson Secret, by host,
// as for reads: spec.destination.secretRef, else spec.registrySecretRef)
// and the signer of spec.destination.signing.
func (r *ManifestSyncReconciler) ociCredentials(ctx context.Context, obj *v1alpha1.ManifestSync, j *job) error {
	spec := j.ms.Spec
	field, ref := "spec.destination.secretRef", spec.Destination.SecretRef
	if ref == nil {
		field, ref = "spec.registrySecretRef", spec.RegistrySecretRef
	}
	kc, id, err := r.secrets.Registry(ctx, obj.Namespace, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	j.dstReg, j.dstRegID = r.engines.registry(id, kc), id
	j.artifactSigner, err = r.secrets.ArtifactSigner(ctx, obj.Namespace, spec.Destination.Signing)
	return err
}

// record writes what a reconcile did into the status, with an Event for a
// commit, a lock or a failure, and says when to come back.
func (r *ManifestSyncReconciler) record(ctx context.Context, obj *v1alpha1.ManifestSync, res hydrate.Result, err error, interval time.Duration, log *slog.Logger) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(obj)
	if err != nil && (ctx.Err() != nil || r.batch.ctx.Err() != nil) {
		return ctrl.Result{}, nil // shutting down: the next leader redoes it
	}
	failures := r.attempts.record(key, err != nil)
	if err == nil && res.Result == hydrate.Unchanged {
		res.Commit = lastWritten(obj, res)
	}

	after := interval
	var reason, msg string
	ready := metav1.ConditionTrue
	switch {
	case err != nil:
		ready, reason, msg = metav1.ConditionFalse, v1alpha1.ReasonFailed, oneLine(err)
		if ve := (*hydrate.VerificationError)(nil); errors.As(err, &ve) {
			reason = v1alpha1.ReasonVerificationFailed
		}
		after = retryDelay(failures, interval)
		// A remote backing off answers every sync with its failure until
		// its next try: ask again just after that, not before.
		if re := (*backoff.RetryError)(nil); errors.As(err, &re) {
			after = max(after, time.Until(re.Next)+time.Duration(rand.Int64N(int64(time.Second))))
		}
		log.Error("hydrating failed", "error", msg, "retry", after)
	case res.Result == hydrate.Locked:
		l := res.Lock
		ready, reason = metav1.ConditionFalse, v1alpha1.ReasonLocked
		msg = fmt.Sprintf("locked by %s's takeover until %s: the controller leaves the folder alone until then", l.Owner, l.Expires)
		if exp, ok := l.ExpiresAt(); ok {
			if left := exp.Sub(r.now()); left > 0 && left < after {
				after = left + time.Second // the lock ends on time, with no command
			}
		}
	case res.PullRequest != nil && res.PullRequest.State == v1alpha1.PullRequestOpen:
		pr := res.PullRequest
		ready, reason = metav1.ConditionFalse, v1alpha1.ReasonPullRequestOpen
		msg = fmt.Sprintf("proposed in pull request #%d (%s), waiting for review", pr.Number, pr.URL)
		after = min(after, pullRequestPoll) // a merge is seen soon
	case res.PullRequest != nil && res.PullRequest.State == v1alpha1.PullRequestMerged:
		reason, msg = v1alpha1.ReasonSucceeded, fmt.Sprintf("pull request #%d merged: up to date at %s on %s", res.PullRequest.Number, short(res.Commit), res.Branch)
	case res.Result == hydrate.Committed:
		reason, msg = v1alpha1.ReasonSucceeded, fmt.Sprintf("%s %s to %s", wrote(obj), short(res.Commit), res.Branch)
	default:
		reason, msg = v1alpha1.ReasonSucceeded, fmt.Sprintf("up to date at %s on %s", short(res.Commit), res.Branch)
		// What said it committed that same commit stays said: the
		// status is written when something changed, not to reword it.
		if c := readyCondition(obj.Status.Conditions); c != nil && c.Reason == v1alpha1.ReasonSucceeded && c.Status == metav1.ConditionTrue &&
			c.Message == fmt.Sprintf("%s %s to %s", wrote(obj), short(res.Commit), res.Branch) {
			msg = c.Message
		}
	}
	if err == nil && len(res.Stale) > 0 {
		// Ready, as far as what is known goes: say what is not current.
		msg += "; not current: " + strings.Join(res.Stale, "; ")
	}
	if err == nil && len(res.Warnings) > 0 {
		msg += fmt.Sprintf("; %d of the chart's hooks are not run as Helm runs them (status.warnings)", len(res.Warnings))
	}
	prevReason := ""
	if c := readyCondition(obj.Status.Conditions); c != nil {
		prevReason = c.Reason
	}
	prevPR := obj.Status.PullRequest
	err = r.patchStatus(ctx, obj, func(st *v1alpha1.ManifestSyncStatus) {
		settle(obj, &st.ReconcileStatus, ready, reason, msg)
		if err != nil {
			return // what was last done stays as it was
		}
		c := obj.DeepCopy()
		c.Default()
		d := c.Spec.Destination
		st.Destination = &v1alpha1.DestinationStatus{Repo: source.Redact(d.Repo), Branch: res.Branch, Path: d.Path, Commit: res.Commit}
		if d.IsOCI() {
			st.Destination = &v1alpha1.DestinationStatus{Repo: d.Repo, Tag: res.Branch, Path: d.Path, Digest: res.Commit}
		}
		if res.Revision != nil {
			rev := *res.Revision
			rev.Repo = source.Redact(rev.Repo)
			st.Source = &rev
		}
		st.Images = res.Images
		st.Deployer, st.Warnings, st.Generated = res.Deployer, res.Warnings, generatedTemplates(res.Generated)
		st.Lock = res.Lock
		st.PullRequest = res.PullRequest
	})
	if reason == v1alpha1.ReasonSucceeded && prevReason == v1alpha1.ReasonLocked {
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, "Unlocked", "Hydrate", "the takeover lock ended")
	}
	switch {
	case reason == v1alpha1.ReasonFailed || reason == v1alpha1.ReasonVerificationFailed:
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Hydrate", "%s", msg)
	case res.Result == hydrate.Committed:
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, "Committed", "Hydrate", "%s", msg)
		if len(res.Warnings) > 0 {
			r.events.Eventf(obj, nil, corev1.EventTypeWarning, "HooksNotAsHelm", "Hydrate", "%s", hooksNote(res.Warnings))
		}
		// A change made is worth a line, as Flux logs what it applied.
		log.Info("committed", "commit", res.Commit, "branch", res.Branch, "path", obj.Spec.Destination.Path)
	case reason == v1alpha1.ReasonLocked && prevReason != v1alpha1.ReasonLocked:
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Hydrate", "%s", msg)
	}
	if pr := res.PullRequest; pr != nil && reason != v1alpha1.ReasonFailed {
		switch {
		case pr.State == v1alpha1.PullRequestOpen && (prevPR == nil || prevPR.Number != pr.Number):
			r.events.Eventf(obj, nil, corev1.EventTypeNormal, "PullRequestOpened", "Hydrate", "opened pull request #%d: %s", pr.Number, pr.URL)
		case pr.State == v1alpha1.PullRequestOpen && res.Result == hydrate.Committed:
			r.events.Eventf(obj, nil, corev1.EventTypeNormal, "PullRequestUpdated", "Hydrate", "updated pull request #%d with %s", pr.Number, short(pr.Commit))
		case prevPR != nil && prevPR.Number == pr.Number && prevPR.State == v1alpha1.PullRequestOpen && pr.State != prevPR.State:
			reason := "PullRequestMerged"
			if pr.State == v1alpha1.PullRequestClosed {
				reason = "PullRequestClosed"
			}
			r.events.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Hydrate", "pull request #%d %s", pr.Number, pr.State)
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// lastWritten is the destination commit a sync that found its folder
// unchanged reports: the one it last knew to write the folder, while
// the branch and folder are the same, not the branch's head, which every
// other sync's commit to the branch moves (a status that changed with
// it would be written again, for every sync of the branch, at each of
// their intervals).
func lastWritten(obj *v1alpha1.ManifestSync, res hydrate.Result) string {
	prev := obj.Status.Destination
	if prev == nil || prev.Commit == "" || prev.Branch != res.Branch {
		return res.Commit
	}
	c := obj.DeepCopy()
	c.Default()
	if d := c.Spec.Destination; prev.Path != d.Path || prev.Repo != source.Redact(d.Repo) {
		return res.Commit
	}
	return prev.Commit
}

// pullRequestPoll is how often an open pull request is looked at, at
// most: its merge makes the sync Ready.
const pullRequestPoll = time.Minute

// finalize removes the folder of a deleted sync with spec.prune, then lets
// it go.
func (r *ManifestSyncReconciler) finalize(ctx context.Context, obj *v1alpha1.ManifestSync, log *slog.Logger) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, pruneFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.prune(ctx, obj); err != nil {
		msg := oneLine(err)
		log.Error("pruning failed", "error", msg)
		r.events.Eventf(obj, nil, corev1.EventTypeWarning, v1alpha1.ReasonFailed, "Prune", "removing the folder: %s", msg)
		return ctrl.Result{RequeueAfter: retryDelay(2, time.Minute)}, nil
	}
	orig := obj.DeepCopy()
	controllerutil.RemoveFinalizer(obj, pruneFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, obj, client.MergeFrom(orig)))
}

// prune removes the sync's folder through the engine (hydrate.Prune),
// which checks that the folder is still the sync's and unlocked inside
// the same edit as the push.
func (r *ManifestSyncReconciler) prune(ctx context.Context, obj *v1alpha1.ManifestSync) error {
	ms, err := r.toConfig(obj)
	if err != nil {
		return nil // it never wrote anything
	}
	j := &job{ms: ms}
	if _, err := r.credentials(ctx, obj, j); err != nil {
		return err
	}
	o := r.batch.options([]*job{j}) // its credentials, signers and registry clients
	o.Now = r.now
	pr, err := hydrate.Prune(source.ContextWithNotBefore(ctx, r.now()), ms, o)
	if err == nil && pr != nil {
		d := ms.Spec.Destination
		r.events.Eventf(obj, nil, corev1.EventTypeNormal, "PruneProposed", "Prune", "removing %s waits for review in pull request #%d: %s", d.Path, pr.Number, pr.URL)
	}
	return err
}

// toConfig is the sync as the engines take it.
func (r *ManifestSyncReconciler) toConfig(obj *v1alpha1.ManifestSync) (config.ManifestSync, error) {
	return config.FromManifestSync(obj, r.allowLocal)
}

// patchStatus applies f to the status and patches it when that changed
// anything.
func (r *ManifestSyncReconciler) patchStatus(ctx context.Context, obj *v1alpha1.ManifestSync, f func(*v1alpha1.ManifestSyncStatus)) error {
	return patchStatus(ctx, r.Client, obj, func() { f(&obj.Status) })
}

// statusTimeout bounds a status write. An API server whose etcd is gone
// holds a write for a minute (its request timeout) without an answer; a
// write given up on after this long marks the API server down (see
// apiServer), so that the outage is seen and said, and reconciles wait
// for /readyz instead of each hanging on its own write.
const statusTimeout = 15 * time.Second

// patchStatus applies f (which changes obj's status) and patches the
// status when that changed anything.
func patchStatus[T client.Object](ctx context.Context, c client.Client, obj T, f func()) error {
	orig := obj.DeepCopyObject().(client.Object)
	f()
	if equality.Semantic.DeepEqual(orig, client.Object(obj)) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	err := c.Status().Patch(ctx, obj, client.MergeFrom(orig))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func readyCondition(cs []metav1.Condition) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == v1alpha1.ConditionReady {
			return &cs[i]
		}
	}
	return nil
}

// short is a commit's first 12 hex digits, or an artifact digest's
// (sha256: and 12).
func short(h string) string {
	algo, hex, ok := strings.Cut(h, ":")
	if !ok {
		algo, hex = "", h
	} else {
		algo += ":"
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return algo + hex
}

// wrote is what the sync's writes are called: commits to a branch,
// pushes of an artifact to a tag.
func wrote(obj *v1alpha1.ManifestSync) string {
	if obj.Spec.Destination.IsOCI() {
		return "pushed"
	}
	return "committed"
}

// oneLine is an error as one line of a status message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(source.Redact(err.Error())), " ")
}

// generatedTemplates names the templates that generated values, with
// their functions ("grafana/templates/secret.yaml: randAlphaNum").
func generatedTemplates(gs []v1alpha1.Generated) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Template+": "+strings.Join(g.Functions, ", "))
	}
	return out
}

// hooksNote names the hooks a deployer does not run as Helm does, within
// an Event's 1024 characters (status.warnings says how, in full).
func hooksNote(warnings []string) string {
	note := fmt.Sprintf("%d of the chart's hooks are not run as Helm runs them (status.warnings says how): ", len(warnings))
	for i, w := range warnings {
		name, _, _ := strings.Cut(w, " ")
		if i > 0 {
			name = ", " + name
		}
		if len(note)+len(name) > 1000 {
			return note + ", …"
		}
		note += name
	}
	return note
}
