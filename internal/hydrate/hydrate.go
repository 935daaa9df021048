package hydrate

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sync/errgroup"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/imagesig"
	"sluice.dev/sluice/internal/override"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/synckey"
)

// Options configure a run.
type Options struct {
	// Cache opens repositories. Required.
	Cache *source.Cache
	// Registry resolves image digests. Required.
	Registry *registry.Client
	// Charts fetches remote charts; the default fetches through Registry
	// without an archive cache.
	Charts *render.Charts
	// Force renders and writes every sync, even an unchanged one.
	Force bool
	// DryRun renders and compares, and writes nothing: each result carries
	// the diff of what would change.
	DryRun bool
	// ManifestsDiff leaves the provenance record and its .sourceignore
	// out of a dry run's diffs: the manifests alone, as a reviewer reads
	// them.
	ManifestsDiff bool
	// DiffLimit, if set, keeps at most this many bytes of each dry run's
	// diff (cut at a line, saying how many lines are left out): what a
	// preview of a huge change holds in memory.
	DiffLimit int
	// OutDir writes the folders under this directory (as
	// OutDir/<branch>/<path>) instead of committing to git.
	OutDir string
	// Parallel bounds the syncs rendered at once; the default is
	// GOMAXPROCS.
	Parallel int
	// Author signs the commits; the default is Sluice <sluice@sluice.dev>.
	Author object.Signature
	// Signer, if set, signs every commit the run makes (hydrations,
	// pull-request heads, locks, prunes) with an SSH or OpenPGP key.
	Signer signing.Signer
	// SignerFor, if set, gives the signer of a sync's commits instead
	// (spec.destination.signing, read by the caller); the syncs sharing
	// a commit must share a signer.
	SignerFor func(config.ManifestSync) signing.Signer
	// VerifierFor gives the trusted keys a sync's source is checked with
	// (spec.source.verify, read by the caller).
	VerifierFor func(config.ManifestSync) (*signing.Verifier, error)
	// ImagePolicyFor gives what an image rule's verify trusts (keys or a
	// keyless identity, read by the caller); nil refuses rules that ask
	// for verification.
	ImagePolicyFor func(config.ManifestSync, v1alpha1.ImageRule) (*imagesig.Policy, error)
	// ImagesVerified remembers the digests found signed across runs; nil
	// checks every time.
	ImagesVerified *imagesig.Verified
	// Log receives debug records of the run's phases; the default
	// discards them.
	Log *slog.Logger
	// StateDir keeps what speeds up the next run (decoded provenance
	// records); empty keeps nothing.
	StateDir string
	// Provenance, if set, is the cache of decoded provenance records the
	// run uses instead of one of StateDir: one shared by a controller's
	// runs (NewProvenanceCache).
	Provenance *ProvenanceCache
	// Progress, if set, is called once per sync as soon as its result is
	// known, from any goroutine but never concurrently.
	Progress func(Result)
	// Only, if set, decides before anything is rendered which syncs the
	// run looks at: one it turns down, given the provenance record its
	// folder holds (nil: none yet), is left as it is, Unchanged and not
	// rendered. A preview renders only the syncs a change reaches.
	Only func(ms config.ManifestSync, prev *v1alpha1.Provenance) bool
	// Overrides apply to the remote kustomize bases the syncs' sources
	// name (the syncs themselves are transformed before Run).
	Overrides override.Set
	// Takeover, when set, makes this run a developer's takeover: each
	// folder's provenance records it and locks the folder until
	// Takeover.Expires. Folders another owner's unexpired takeover locks
	// are refused, unless Steal.
	Takeover *v1alpha1.Takeover
	// Steal lets a takeover (or Release) take folders another owner locks.
	Steal bool
	// Release lifts the locks of this owner: a regular run that writes
	// their folders back.
	Release string
	// Now is the clock locks expire by; the default is time.Now.
	Now func() time.Time
	// Limits bound each sync's render (render.DefaultLimits for zero
	// fields): a sync past them fails, the others go on.
	Limits render.Limits
	// Credentials, if set, gives a sync's own credentials for its source
	// and its destination (a controller's Secrets); a nil one, and the
	// default, use the Cache's.
	Credentials func(ms config.ManifestSync) (src, dst *source.Credentials)
	// RegistryFor, if set, gives the client a sync's images are pinned
	// through (its own registry credentials); nil is Registry.
	RegistryFor func(ms config.ManifestSync) *registry.Client
	// ChartsFor, if set, gives what fetches a sync's remote chart (through
	// its own registry credentials); nil is Charts.
	ChartsFor func(ms config.ManifestSync) *render.Charts
	// SyncContext, if set, derives the context a sync is checked and
	// rendered under (a controller asks, for a sync a webhook named, for
	// what the remotes hold since the webhook).
	SyncContext func(ctx context.Context, ms config.ManifestSync) context.Context
	// Egress is where the remote kustomize bases and files sources name
	// may be read from (their redirects too), besides the hosts of the
	// repositories the person's own files name (Cache.TrustedHosts); nil:
	// anywhere.
	Egress *egress.Policy
	// NoRemoteBases refuses remote kustomize bases and files altogether,
	// as Flux's --no-remote-bases does: a source must hold what it renders.
	NoRemoteBases bool
	// Sandbox, if set, renders each sync (and executes each pull request
	// template a sync sets) in a worker process of its own, within its
	// limits: what a controller shared by many teams, and `sluice
	// hydrate`, do. nil renders in this process.
	Sandbox *sandbox.Sandbox
	// SyncKey is the key the values a chart's templates generate, and the
	// digests that tell an unchanged encrypted Secret, are derived from,
	// per sync (see package synckey). Without one, a sync that needs it
	// fails, with SyncKeyMissing (how to pass it; DefaultSyncKeyMissing
	// when empty).
	SyncKey        synckey.Key
	SyncKeyMissing string
	// RenderSlots, if set, bounds the renders of this run together with
	// those of every other run given the same channel (a controller's
	// concurrent runs); its capacity is the bound, and Parallel is then
	// ignored.
	RenderSlots chan struct{}
	// ArtifactSigner, when set, signs every OCI artifact pushed and
	// attaches its SLSA provenance, both before its tag moves: a push
	// whose signing fails moves no tag (the command line's key).
	ArtifactSigner artifactsig.Signer
	// ArtifactSignerFor, if set, gives the signer of a sync's artifacts
	// (spec.destination.signing, as a controller reads its Secret); nil,
	// and nil from it, is ArtifactSigner. An error fails the sync.
	ArtifactSignerFor func(ms config.ManifestSync) (artifactsig.Signer, error)
	// DestinationRegistryFor, if set, gives the client a sync's OCI
	// destination is read and pushed through (its write credentials);
	// nil, and nil from it, is the client its images are pinned through.
	DestinationRegistryFor func(ms config.ManifestSync) *registry.Client
	// Version is Sluice's, for the provenance.
	Version string
	// Artifacts, when set, keeps the OCI artifacts read and pushed across
	// runs (a controller's): an artifact whose tag has not moved is read
	// with one HEAD request.
	Artifacts *ArtifactCache
	// TagGuard, when set, is asked right before an OCI destination's tag
	// moves (a controller's: does it still lead?); an error moves no tag.
	// A git push is guarded by the Cache's own guard.
	TagGuard func(context.Context) error
}

// charts is what fetches a sync's remote chart.
func (o *Options) charts(ms config.ManifestSync) *render.Charts {
	if o.ChartsFor != nil {
		if c := o.ChartsFor(ms); c != nil {
			return c
		}
	}
	return o.Charts
}

// credentials are a sync's own source and destination credentials.
func (o *Options) credentials(ms config.ManifestSync) (src, dst *source.Credentials) {
	if o.Credentials == nil {
		return nil, nil
	}
	return o.Credentials(ms)
}

// artifactSigner is what signs a sync's OCI artifacts: nil when they
// are pushed unsigned, an error when spec.destination.signing asks for a
// signature and nothing can make it.
func (o *Options) artifactSigner(ms config.ManifestSync) (artifactsig.Signer, error) {
	if o.ArtifactSignerFor != nil {
		s, err := o.ArtifactSignerFor(ms)
		if err != nil || s != nil {
			return s, err
		}
	}
	if o.ArtifactSigner == nil && ms.Spec.Destination.Signing != nil {
		return nil, fmt.Errorf("spec.destination.signing asks for signed artifacts: sign them with --artifact-key (a cosign key), --artifact-keyless (an identity token) or --artifact-notation-key and --artifact-notation-cert")
	}
	return o.ArtifactSigner, nil
}

// destinationRegistry is the client a sync's OCI destination is pushed
// through.
func (o *Options) destinationRegistry(ms config.ManifestSync) *registry.Client {
	if o.DestinationRegistryFor != nil {
		if c := o.DestinationRegistryFor(ms); c != nil {
			return c
		}
	}
	return o.registry(ms)
}

// registry is the client a sync pins through.
func (o *Options) registry(ms config.ManifestSync) *registry.Client {
	if o.RegistryFor != nil {
		if c := o.RegistryFor(ms); c != nil {
			return c
		}
	}
	return o.Registry
}

func (o *Options) provenanceCache() *ProvenanceCache {
	if o.Provenance != nil {
		return o.Provenance
	}
	return loadProvenanceCache(o.StateDir)
}

// Outcome is what became of one sync.
type Outcome string

// Outcomes.
const (
	// Unchanged: the destination already holds this render.
	Unchanged Outcome = "unchanged"
	// Committed: a commit with this sync's folder was pushed.
	Committed Outcome = "committed"
	// Changed: the folder would change (dry run), or was written (--out).
	Changed Outcome = "changed"
	// Failed: nothing of this sync was written.
	Failed Outcome = "failed"
	// Locked: a developer's takeover holds the folder; it was left alone.
	Locked Outcome = "locked"
)

// Result is the outcome of one sync.
type Result struct {
	Name   string  `json:"name"`
	Result Outcome `json:"result"`
	// Commit is the destination commit that holds the folder (new when
	// committed).
	Commit string `json:"commit,omitempty"`
	// Destination is repo, branch and folder.
	Destination string `json:"destination"`
	// Branch is the branch written (a review branch in branch mode).
	Branch string `json:"branch,omitempty"`
	// Source is the repo, path and commit read.
	Source string `json:"source,omitempty"`
	// Revision is the same, each part on its own.
	Revision *v1alpha1.ProvenanceSource `json:"revision,omitempty"`
	// Images are the pinned images.
	Images []v1alpha1.PinnedImage `json:"images,omitempty"`
	// Stale are the tags whose digest was answered from an earlier
	// look-up that could not be made current (the registry failing, or
	// holding requests back): what is pinned may be behind the tag. One
	// line each, saying why.
	Stale []string `json:"stale,omitempty"`
	// Rendered tells whether the source was rendered (false when the
	// inputs were seen unchanged without rendering).
	Rendered bool `json:"rendered"`
	// Deployer is the tool the folder is for.
	Deployer string `json:"deployer,omitempty"`
	// Warnings say where the deployer will not do what Helm does with
	// the chart, naming each hook.
	Warnings []string `json:"warnings,omitempty"`
	// Generated names the templates that generated values (never the
	// values), and Lookups those that called lookup.
	Generated []v1alpha1.Generated `json:"generated,omitempty"`
	Lookups   []string             `json:"lookups,omitempty"`
	// Secrets say what became of each Secret, without its values.
	Secrets []v1alpha1.SecretRecord `json:"secrets,omitempty"`
	// Diff is the unified diff of the folder (dry run only).
	Diff string `json:"diff,omitempty"`
	// DiffCut says Diff was kept to Options.DiffLimit.
	DiffCut bool `json:"diffCut,omitempty"`
	// Changes are the objects the diff adds, changes and removes, and the
	// images it pins anew (dry run only).
	Changes *Changes `json:"changes,omitempty"`
	// Lock is the takeover holding the folder (Locked only).
	Lock *v1alpha1.Takeover `json:"lock,omitempty"`
	// PullRequest is the pull request proposing the folder (pullRequest
	// mode).
	PullRequest *v1alpha1.PullRequestStatus `json:"pullRequest,omitempty"`
	Error       string                      `json:"error,omitempty"`
	Err         error                       `json:"-"`
}

// Report holds the results of a run, in the order of the syncs given.
type Report struct {
	Results []Result
}

// Failed returns the failed results.
func (r *Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Result == Failed {
			out = append(out, res)
		}
	}
	return out
}

// Changed reports whether any sync committed or would change.
func (r *Report) Changed() bool {
	for _, res := range r.Results {
		if res.Result == Committed || res.Result == Changed {
			return true
		}
	}
	return false
}

// Err summarises the failures as one error, nil when there are none.
func (r *Report) Err() error {
	failed := r.Failed()
	if len(failed) == 0 {
		return nil
	}
	names := make([]string, len(failed))
	for i, f := range failed {
		names[i] = f.Name
	}
	return fmt.Errorf("%d of %d syncs failed: %s", len(failed), len(r.Results), strings.Join(names, ", "))
}

// Run hydrates the syncs. It returns an error only when the run could not
// start; each sync's failure is in its Result.
func Run(ctx context.Context, syncs []config.ManifestSync, o Options) (*Report, error) {
	if o.Cache == nil || o.Registry == nil {
		return nil, fmt.Errorf("hydrate: Cache and Registry are required")
	}
	if o.Charts == nil {
		o.Charts = &render.Charts{Registry: o.Registry}
	}
	if o.Parallel <= 0 {
		o.Parallel = runtime.GOMAXPROCS(0)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	start := time.Now()

	r := &runner{o: o, results: make([]Result, len(syncs)), branches: map[string]*destination.Branch{}, artifacts: map[string]*artifact{},
		provenance: o.provenanceCache(), egress: o.Egress.Allowing(o.Cache.TrustedHosts()...)}
	defer r.provenance.save()
	plans := make([]*plan, len(syncs))
	// Checking a sync is mostly waiting (on git and registries); rendering
	// is CPU. Many checks run at once; renders, only Parallel.
	r.renders = o.RenderSlots
	if r.renders == nil {
		r.renders = make(chan struct{}, o.Parallel)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(16, 4*o.Parallel))
	for i, s := range syncs {
		g.Go(func() error {
			sctx := syncContext(gctx, s)
			if o.SyncContext != nil {
				sctx = o.SyncContext(sctx, s)
			}
			sctx, stale := registry.ContextWithStaleReport(sctx)
			p := r.plan(sctx, s)
			p.stale = stale.Notes()
			plans[i] = p
			// A proposal's unchanged syncs still learn how their pull
			// request stands, at the write.
			if p.err != nil || o.DryRun || (p.folder == nil && !(isProposal(p) && p.dstRepo != nil)) {
				r.finish(i, p.result())
			}
			return nil
		})
	}
	g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.Log.Debug("planned", "syncs", len(syncs), "elapsed", time.Since(start))
	if !o.DryRun {
		r.write(ctx, plans)
		o.Log.Debug("written", "elapsed", time.Since(start))
	}
	return &Report{Results: r.results}, nil
}

// syncContext asks, for a sync with an interval (a controller's), for
// clones and tag look-ups no older than it: a long-lived cache shared by
// many syncs then fetches a repository, and looks a tag up, at most once
// per interval.
func syncContext(ctx context.Context, ms config.ManifestSync) context.Context {
	if iv := ms.Spec.Interval; iv != nil && iv.Duration > 0 {
		ctx = source.ContextWithMaxAge(ctx, iv.Duration)
		ctx = registry.ContextWithMaxAge(ctx, iv.Duration)
	}
	return ctx
}

type runner struct {
	o        Options
	mu       sync.Mutex
	results  []Result
	branches map[string]*destination.Branch
	// artifacts are the OCI destinations read, by repository and tag.
	artifacts  map[string]*artifact
	provenance *ProvenanceCache
	renders    chan struct{}
	// egress is where what sources name may be read from.
	egress *egress.Policy
}

func (r *runner) finish(i int, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res.Err != nil {
		res.Result, res.Error = Failed, res.Err.Error()
	}
	r.results[i] = res
	if r.o.Progress != nil {
		r.o.Progress(res)
	}
}

// write lands every changed folder: one commit per destination branch (or
// files under OutDir), the branches in parallel.
func (r *runner) write(ctx context.Context, plans []*plan) {
	type group struct {
		repo    *source.Repo
		branch  string
		from    string
		indexes []int
	}
	groups := map[string]*group{}
	proposals := map[string]*group{}
	ociGroups := map[*artifact][]int{}
	var artifacts []*artifact
	var keys, proposalKeys []string
	for i, p := range plans {
		if p.err == nil && p.dstRepo != nil && isProposal(p) && r.o.OutDir == "" {
			key := fmt.Sprintf("%s#%p#%s", p.dstRepo.Location().Key(), p.dstRepo, p.branch)
			g, ok := proposals[key]
			if !ok {
				g = &group{}
				proposals[key] = g
				proposalKeys = append(proposalKeys, key)
			}
			g.indexes = append(g.indexes, i)
			continue
		}
		if p.err != nil || p.folder == nil {
			continue
		}
		if r.o.OutDir != "" {
			r.finish(i, p.writeDir(destination.Dir{Root: r.o.OutDir}))
			continue
		}
		if a := p.artifact; a != nil {
			if _, ok := ociGroups[a]; !ok {
				artifacts = append(artifacts, a)
			}
			ociGroups[a] = append(ociGroups[a], i)
			continue
		}
		key := fmt.Sprintf("%s#%p#%s", p.dstRepo.Location().Key(), p.dstRepo, p.branch)
		g, ok := groups[key]
		if !ok {
			g = &group{repo: p.dstRepo, branch: p.branch, from: p.from}
			groups[key] = g
			keys = append(keys, key)
		}
		g.indexes = append(g.indexes, i)
	}
	sort.Strings(keys)
	var wg sync.WaitGroup
	for _, a := range artifacts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.writeArtifact(ctx, a, plans, ociGroups[a])
		}()
	}
	// An artifact no sync changed may still lack a tag an earlier push
	// was cut short before: given now, or its syncs fail.
	r.mu.Lock()
	for _, a := range r.artifacts {
		if _, written := ociGroups[a]; written || a.err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.completeTags(ctx, a); err != nil {
				for i, p := range plans {
					if p.artifact == a && p.err == nil {
						out := p.result()
						out.Err = fmt.Errorf("completing the tags of %s%s: %w", v1alpha1.OCIScheme, a.tag, err)
						r.finish(i, out)
					}
				}
			}
		}()
	}
	r.mu.Unlock()
	for _, k := range proposalKeys {
		g := proposals[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.propose(ctx, plans, g.indexes)
		}()
	}
	for _, k := range keys {
		g := groups[k]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var changes []destination.Change
			var members []*plan
			for _, i := range g.indexes {
				changes = append(changes, destination.Change{Path: plans[i].dstPath, Files: plans[i].folder, Was: plans[i].was})
				members = append(members, plans[i])
			}
			signer, err := r.o.signer(members)
			var res destination.Result
			if err == nil {
				res, err = destination.Write(ctx, g.repo, g.branch, changes, destination.WriteOptions{
					Message: commitMessage(members), Author: r.o.Author, Signer: signer, From: g.from,
				})
			}
			for _, i := range g.indexes {
				out := plans[i].result()
				switch {
				case err == destination.ErrNoChange:
					out.Result = Unchanged
				case err != nil:
					out.Err = fmt.Errorf("writing %s: %w", g.branch, err)
				default:
					out.Result, out.Commit = Committed, res.Commit.String()
				}
				r.finish(i, out)
			}
		}()
	}
	wg.Wait()
}

// signer is the signer of a commit of the syncs' changes: theirs, which
// must be one.
func (o *Options) signer(members []*plan) (signing.Signer, error) {
	if o.SignerFor == nil {
		return o.Signer, nil
	}
	var s signing.Signer
	for i, p := range members {
		ps := o.SignerFor(p.ms)
		if i > 0 && identity(ps) != identity(s) {
			return nil, fmt.Errorf("the syncs writing %s sign with different keys (%s by %s, %s by %s): give them one spec.destination.signing", p.ms.Spec.Destination.Branch,
				identity(s), members[0].ms.Name, identity(ps), p.ms.Name)
		}
		s = ps
	}
	return s, nil
}

// signerOf is the signer of one sync's commits.
func (o *Options) signerOf(ms config.ManifestSync) signing.Signer {
	if o.SignerFor == nil {
		return o.Signer
	}
	return o.SignerFor(ms)
}

func identity(s signing.Signer) string {
	if s == nil {
		return "no key"
	}
	return s.Identity()
}
