package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/imagesig"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
)

// job is one ManifestSync waiting for its batch.
type job struct {
	ms       config.ManifestSync
	src, dst *source.Credentials
	reg      *regClient
	// signer signs the sync's commits (spec.destination.signing).
	signer signing.Signer
	// An OCI destination's: the client it is pushed through (its write
	// credentials: spec.destination.secretRef, else the images'), with
	// the identity of those credentials, and what signs its artifacts.
	dstReg         *regClient
	dstRegID       string
	artifactSigner artifactsig.Signer
	// verifier checks its source's signatures (spec.source.verify).
	verifier *signing.Verifier
	// imageKeys are the keys its image rules' verify trust, by Secret.
	imagePolicies map[string]*imagesig.Policy
	// notBefore, when set, asks for what the remotes hold since then:
	// the source and the tags, or only the source (requestFor
	// v1alpha1.RequestForSource: a git push) or the tags (RequestForImages).
	notBefore  time.Time
	requestFor string
	done       chan batchResult
}

type batchResult struct {
	res hydrate.Result
	err error // the batch could not run
}

// batcher hydrates ManifestSyncs in batches, one destination branch at a
// time: the syncs of a branch that come due together are checked
// together (sharing each clone and tag look-up) and land as one commit,
// however many changed. A branch has one batch running at most; syncs
// arriving meanwhile wait for the next. Batches of different branches run
// side by side, as many as slots allows.
type batcher struct {
	ctx  context.Context
	base hydrate.Options
	// keys, if set, gives the sync key each batch runs with.
	keys   *syncKeys
	slots  chan struct{}
	window time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	queues map[string][]*job // branch key → jobs waiting; present while a runner lives
}

func newBatcher(ctx context.Context, e *engines, concurrent int, log *slog.Logger) *batcher {
	return &batcher{
		ctx: ctx,
		base: hydrate.Options{
			Cache: e.cache, Registry: e.registry("anonymous", nil).reg, Limits: e.limits,
			RenderSlots: make(chan struct{}, concurrent), Parallel: concurrent,
			Log: log, ImagesVerified: &imagesig.Verified{}, Provenance: hydrate.NewProvenanceCache(),
			TagGuard: e.guard, Artifacts: hydrate.NewArtifactCache(),
		},
		slots:  make(chan struct{}, concurrent),
		window: 100 * time.Millisecond,
		log:    log,
		queues: map[string][]*job{},
	}
}

// branchKey names the destination branch (or OCI tag) a sync writes, and
// the credentials it writes with: another Secret is another clone, or
// another registry client.
func branchKey(j *job) string {
	d := j.ms.Spec.Destination
	if d.IsOCI() {
		return d.Repo + "\x00" + d.Tag + "\x00" + j.dstRegID
	}
	key := d.Repo
	if loc, err := source.ParseLocation(d.Repo, j.ms.Origin.Dir); err == nil {
		key = loc.Key()
	}
	key += "\x00" + d.Branch
	if j.dst != nil {
		key += "\x00" + j.dst.Scope
	}
	return key
}

// submit queues j and waits for its result.
func (b *batcher) submit(ctx context.Context, j *job) (hydrate.Result, error) {
	j.done = make(chan batchResult, 1)
	key := branchKey(j)
	b.mu.Lock()
	waiting, running := b.queues[key]
	b.queues[key] = append(waiting, j)
	b.mu.Unlock()
	if !running {
		go b.run(key)
	}
	select {
	case r := <-j.done:
		return r.res, r.err
	case <-ctx.Done():
		return hydrate.Result{}, ctx.Err()
	}
}

// run hydrates the batches of one branch until none is waiting.
func (b *batcher) run(key string) {
	for {
		// Syncs due together arrive over a few milliseconds (the
		// reconcilers each read their resource first): gather them.
		select {
		case <-time.After(b.window):
		case <-b.ctx.Done():
		}
		b.mu.Lock()
		jobs := b.queues[key]
		if len(jobs) == 0 {
			delete(b.queues, key)
			b.mu.Unlock()
			return
		}
		b.queues[key] = jobs[:0:0]
		b.mu.Unlock()
		select {
		case b.slots <- struct{}{}:
			b.hydrate(jobs)
			<-b.slots
		case <-b.ctx.Done():
			for _, j := range jobs {
				j.done <- batchResult{err: b.ctx.Err()}
			}
		}
	}
}

// options are the engine's options for a batch of jobs: each sync with
// its own credentials, registry client, signer and trust.
func (b *batcher) options(jobs []*job) hydrate.Options {
	// By namespace and name, not by pointer: a preview hands the engine
	// copies of the syncs, pointed at a merge.
	by := make(map[types.NamespacedName]*job, len(jobs))
	for _, j := range jobs {
		by[types.NamespacedName{Namespace: j.ms.Namespace, Name: j.ms.Name}] = j
	}
	o := b.base
	if b.keys != nil {
		o.SyncKey, o.SyncKeyMissing = b.keys.get(b.ctx)
	}
	o.Credentials = func(ms config.ManifestSync) (*source.Credentials, *source.Credentials) {
		j := by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}]
		return j.src, j.dst
	}
	o.RegistryFor = func(ms config.ManifestSync) *registry.Client {
		return by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].reg.reg
	}
	o.DestinationRegistryFor = func(ms config.ManifestSync) *registry.Client {
		if c := by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].dstReg; c != nil {
			return c.reg
		}
		return nil
	}
	o.ArtifactSignerFor = func(ms config.ManifestSync) (artifactsig.Signer, error) {
		return by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].artifactSigner, nil
	}
	o.SignerFor = func(ms config.ManifestSync) signing.Signer {
		return by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].signer
	}
	o.VerifierFor = func(ms config.ManifestSync) (*signing.Verifier, error) {
		return by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].verifier, nil
	}
	o.ImagePolicyFor = func(ms config.ManifestSync, rule v1alpha1.ImageRule) (*imagesig.Policy, error) {
		if pol := by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].imagePolicies[rule.Verify.Key()]; pol != nil {
			return pol, nil
		}
		return nil, fmt.Errorf("verify: %s was not read", rule.Verify.Key())
	}
	o.ChartsFor = func(ms config.ManifestSync) *render.Charts {
		return by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}].reg.charts
	}
	o.SyncContext = func(ctx context.Context, ms config.ManifestSync) context.Context {
		j := by[types.NamespacedName{Namespace: ms.Namespace, Name: ms.Name}]
		if !j.notBefore.IsZero() && j.requestFor != v1alpha1.RequestForImages {
			ctx = source.ContextWithNotBefore(ctx, j.notBefore)
		}
		if !j.notBefore.IsZero() && j.requestFor != v1alpha1.RequestForSource {
			ctx = registry.ContextWithNotBefore(ctx, j.notBefore)
		} else {
			// An interval's re-check, or a git push, renders with the
			// digests known and looks a stale tag up behind the render:
			// the batch (and the branch's commits) do not wait on
			// look-ups queued behind the registry's rate, and a tag
			// found moved asks for its syncs' reconciles (tagMoved).
			ctx = registry.ContextWithRevalidate(ctx)
		}
		return ctx
	}
	return o
}

// hydrate runs one batch.
func (b *batcher) hydrate(jobs []*job) {
	start := time.Now()
	syncs := make([]config.ManifestSync, len(jobs))
	for i, j := range jobs {
		syncs[i] = j.ms
	}
	o := b.options(jobs)
	rep, err := hydrate.Run(b.ctx, syncs, o)
	batchDuration.Observe(time.Since(start).Seconds())
	batchSize.Observe(float64(len(jobs)))
	committed := false
	for i, j := range jobs {
		var r batchResult
		if err != nil {
			r.err = err
		} else {
			r.res = rep.Results[i]
			syncResults.WithLabelValues(string(r.res.Result)).Inc()
			if r.res.Rendered {
				renders.Inc()
			}
			committed = committed || r.res.Result == hydrate.Committed
		}
		j.done <- r
	}
	if committed {
		commits.Inc()
	}
	b.log.Debug("batch", "syncs", len(jobs), "elapsed", time.Since(start), "committed", committed)
}
