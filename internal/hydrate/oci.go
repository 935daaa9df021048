package hydrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/registry"
)

// artifact is an OCI destination as a run reads it once: what its tag
// holds, in memory, where the run's folders are written before they are
// packed and pushed together, as one artifact.
type artifact struct {
	tag name.Tag
	reg *registry.Client
	dir files
	// digest is what the tag pointed at when read ("" when it did not
	// exist), and immutable the immutable tag its push gave it (known
	// when it was downloaded, not taken from the cache).
	digest    string
	immutable string
	// read reads it once, for the first sync that asks; err is its
	// failure, every sync's.
	read sync.Once
	err  error
}

// openArtifact reads the artifact an OCI destination's tag names (once
// per run, whatever number of syncs write it) and returns a reader of its
// folders. An artifact Sluice did not push reads as empty: the push
// refuses to move its tag, naming it.
func (r *runner) openArtifact(ctx context.Context, p *plan) (folderReader, error) {
	d := p.ms.Spec.Destination
	p.branch = d.Tag
	reg := r.o.destinationRegistry(p.ms)
	repo, err := reg.ParseRepository(strings.TrimPrefix(d.Repo, v1alpha1.OCIScheme))
	if err != nil {
		return nil, fmt.Errorf("spec.destination.repo %q: %w", d.Repo, err)
	}
	// One per repository, tag and registry client (credentials): the
	// runner's lock is held only to find it, never over the registry.
	key := fmt.Sprintf("%s:%s#%p", repo.Name(), d.Tag, reg)
	r.mu.Lock()
	a, ok := r.artifacts[key]
	if !ok {
		a = &artifact{tag: repo.Tag(d.Tag), reg: reg}
		r.artifacts[key] = a
	}
	r.mu.Unlock()
	a.read.Do(func() { a.err = r.stage(ctx, a) })
	if a.err != nil {
		return nil, a.err
	}
	p.tip, p.artifact = a.digest, a
	return a.dir, nil
}

// stage reads what a's tag holds: from the ArtifactCache when the tag
// still names an artifact read before (one HEAD request), else
// downloaded and checked.
func (r *runner) stage(ctx context.Context, a *artifact) error {
	f, digest, immutable, found, err := r.readArtifact(ctx, a)
	if err != nil {
		return err
	}
	a.immutable = immutable
	a.dir = maps.Clone(files(f)) // the cache's map is never written
	if a.dir == nil {
		a.dir = files{}
	}
	if found {
		a.digest = digest
	}
	return nil
}

// files are an artifact's files by slash-separated path (as
// ociartifact.Files checked them), read as a branch is.
type files map[string][]byte

// TreeHash is not known: ok is always false.
func (f files) TreeHash(string) (string, bool, error) { return "", false, nil }

// Hashes lists a folder's files with their git blob hashes; nil when the
// folder is absent.
func (f files) Hashes(folder string) (map[string]string, error) {
	fo, err := f.ReadFolder(folder)
	if err != nil || fo == nil {
		return nil, err
	}
	return fo.Hashes(), nil
}

// ReadFile reads a file; ok is false when it is absent.
func (f files) ReadFile(p string) ([]byte, bool, error) {
	data, ok := f[p]
	return data, ok, nil
}

// ReadFolder reads every file of a folder; nil when it is absent.
func (f files) ReadFolder(folder string) (destination.Folder, error) {
	var out destination.Folder
	prefix := strings.Trim(folder, "/") + "/"
	for p, data := range f {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			if out == nil {
				out = destination.Folder{}
			}
			out[rest] = data
		}
	}
	return out, nil
}

// removeFolder removes a folder's files.
func (f files) removeFolder(folder string) {
	prefix := strings.Trim(folder, "/") + "/"
	for p := range f {
		if strings.HasPrefix(p, prefix) {
			delete(f, p)
		}
	}
}

// writeFolder replaces a folder with the given files.
func (f files) writeFolder(folder string, fo destination.Folder) error {
	f.removeFolder(folder)
	for name, data := range fo {
		p := path.Join(strings.Trim(folder, "/"), name)
		if !strings.HasPrefix(p, strings.Trim(folder, "/")+"/") {
			return fmt.Errorf("%s is outside %s", name, folder)
		}
		f[p] = data
	}
	return nil
}

// readArtifact reads the files of the artifact a's tag names (none when
// the tag is missing, or names an artifact Sluice did not push).
func (r *runner) readArtifact(ctx context.Context, a *artifact) (files map[string][]byte, digest, immutable string, found bool, err error) {
	cache := r.o.Artifacts
	if cache != nil {
		desc, err := remote.Head(a.tag, a.reg.Options(ctx)...)
		if err == nil {
			if files, ok := cache.get(a.tag.Context().Name(), desc.Digest.String()); ok {
				return files, desc.Digest.String(), "", true, nil
			}
		}
	}
	files, m, d, found, err := ociartifact.Read(ctx, a.tag, ociartifact.DefaultLimits(), a.reg.Options(ctx)...)
	switch {
	case err != nil && (m == nil || ociartifact.Ours(m)):
		return nil, "", "", false, fmt.Errorf("reading %s%s: %w", v1alpha1.OCIScheme, a.tag, err)
	case err != nil || (found && !ociartifact.Ours(m)):
		return nil, d.String(), "", found, nil // someone else's: nothing of it is kept
	}
	if found && cache != nil {
		cache.put(a.tag.Context().Name(), d.String(), files)
	}
	if !found {
		return nil, "", "", false, nil
	}
	if len(m.Layers) > 0 {
		immutable = immutableTagOf(a.tag.TagStr(), m.Layers[0].Digest, m.Annotations[ociartifact.AnnotationRevision])
	}
	return files, d.String(), immutable, true, nil
}

// completeTags gives an artifact no sync of the run changed the
// immutable tag its push should have given it, if it lacks it: what a
// push cut short between its tags left out (Sluice before this one moved
// the environment's tag first), asking TagGuard first.
func (r *runner) completeTags(ctx context.Context, a *artifact) error {
	if a.digest == "" || a.immutable == "" {
		return nil
	}
	ref := a.tag.Context().Digest(a.digest)
	done, err := ociartifact.Complete(ctx, ref, []string{a.immutable}, r.o.TagGuard, a.reg.PushOptions(ctx)...)
	if len(done) > 0 {
		r.o.Log.Info("completed an artifact's tags", "artifact", ref.String(), "tags", done)
	}
	return err
}

// ArtifactCache keeps the files of the OCI artifacts a controller read
// or pushed, by repository and digest: an artifact whose tag has not
// moved is not downloaded and unpacked again at each reconcile (a HEAD
// request tells). It holds the latest artifacts only, 256 MiB of files
// at most (an artifact may hold 128 MiB: ociartifact.DefaultLimits).
type ArtifactCache struct {
	mu    sync.Mutex
	files map[string]map[string][]byte
	size  map[string]int64
	total int64
	order []string
}

// NewArtifactCache returns an empty cache.
func NewArtifactCache() *ArtifactCache {
	return &ArtifactCache{files: map[string]map[string][]byte{}, size: map[string]int64{}}
}

const artifactCacheBytes = 256 << 20

func (c *ArtifactCache) get(repo, digest string) (map[string][]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[repo+"@"+digest]
	return f, ok
}

func (c *ArtifactCache) put(repo, digest string, files map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := repo + "@" + digest
	if _, ok := c.files[key]; ok {
		return
	}
	var n int64
	for p, data := range files {
		n += int64(len(p) + len(data))
	}
	if n > artifactCacheBytes/2 {
		return // read again when needed: one such artifact would crowd out the rest
	}
	c.files[key], c.size[key] = files, n
	c.total += n
	c.order = append(c.order, key)
	for c.total > artifactCacheBytes {
		old := c.order[0]
		c.total -= c.size[old]
		delete(c.files, old)
		delete(c.size, old)
		c.order = c.order[1:]
	}
}

// writeArtifact lands the changed folders of one OCI destination's tag:
// each written into the staged artifact, the whole packed and pushed,
// the tag moved once the artifact is whole (and only when it changed).
// Every sync of the tag lands, or none does.
func (r *runner) writeArtifact(ctx context.Context, a *artifact, plans []*plan, indexes []int) {
	res, err := r.pushArtifact(ctx, a, plans, indexes)
	for _, i := range indexes {
		out := plans[i].result()
		switch {
		case err != nil:
			out.Err = fmt.Errorf("pushing %s%s: %w", v1alpha1.OCIScheme, a.tag, err)
		case !res.Pushed:
			out.Result, out.Commit = Unchanged, res.Digest.String()
		default:
			out.Result, out.Commit = Committed, res.Digest.String()
		}
		r.finish(i, out)
	}
}

// pushArtifact stages the syncs' folders, packs the artifact and pushes
// it (signed first, when there is a key).
func (r *runner) pushArtifact(ctx context.Context, a *artifact, plans []*plan, indexes []int) (ociartifact.PushResult, error) {
	for _, i := range indexes {
		if err := a.dir.writeFolder(plans[i].dstPath, plans[i].folder); err != nil {
			return ociartifact.PushResult{}, fmt.Errorf("staging %s: %w", plans[i].dstPath, err)
		}
	}
	signer, err := r.signer(plans, indexes)
	if err != nil {
		return ociartifact.PushResult{}, err
	}
	var prov artifactsig.Provenance
	if signer != nil { // attested only when signed
		prov = r.provenanceOf(plans, indexes)
	}
	return r.pushStaged(ctx, a, artifactMeta(plans, indexes), signer, prov)
}

// pushStaged packs what a's directory holds and pushes it: by digest,
// then signed with its provenance (when there is a signer), then, if
// TagGuard allows, tagged.
func (r *runner) pushStaged(ctx context.Context, a *artifact, meta ociartifact.Meta, signer artifactsig.Signer, prov artifactsig.Provenance) (ociartifact.PushResult, error) {
	files := maps.Clone(a.dir) // as pushed, whatever is written after
	meta.Takeover = r.locks(files)
	packed, err := ociartifact.Pack(files, meta)
	if err != nil {
		return ociartifact.PushResult{}, err
	}
	o := ociartifact.PushOptions{Remote: a.reg.PushOptions(ctx)}
	t, err := immutableTag(a.tag.TagStr(), packed, meta)
	if err != nil {
		return ociartifact.PushResult{}, err
	}
	o.Tags = []string{t}
	o.Guard = r.o.TagGuard
	// A takeover's artifact is tagged with its deployment tag as well.
	if t := r.o.Takeover; t != nil && t.Tag != "" && t.Tag != a.tag.TagStr() && v1alpha1.ValidateTag(t.Tag) == nil {
		o.Tags = append(o.Tags, t.Tag)
	}
	o.BeforeTag = func(ctx context.Context, ref name.Digest) error {
		if signer != nil {
			if err := r.signArtifact(ctx, ref, a, signer, prov); err != nil {
				return err
			}
		}
		if r.o.TagGuard != nil {
			return r.o.TagGuard(ctx)
		}
		return nil
	}
	res, err := ociartifact.Push(ctx, a.tag, packed, o)
	if c := r.o.Artifacts; c != nil && err == nil {
		c.put(a.tag.Context().Name(), res.Digest.String(), files) // what the tag names now
	}
	return res, err
}

// signer is what signs the artifact of the syncs of indexes: every one
// of them must ask for the same signature (or none).
func (r *runner) signer(plans []*plan, indexes []int) (artifactsig.Signer, error) {
	var out artifactsig.Signer
	for n, i := range indexes {
		s, err := r.o.artifactSigner(plans[i].ms)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", plans[i].ms.Name, err)
		}
		first := plans[indexes[0]].ms.Name
		switch {
		case n == 0:
			out = s
		case (s == nil) != (out == nil) || (s != nil && s.String() != out.String()):
			return nil, fmt.Errorf("%s and %s write one artifact and sign it differently (%s; %s): give them the same spec.destination.signing", first, plans[i].ms.Name, signedBy(out), signedBy(s))
		}
	}
	return out, nil
}

func signedBy(s artifactsig.Signer) string {
	if s == nil {
		return "unsigned"
	}
	return s.String()
}

// artifactMeta is the origin an artifact's annotations give: the source
// its syncs share (Flux shows it as the artifact's origin); none when
// they read several.
func artifactMeta(plans []*plan, indexes []int) ociartifact.Meta {
	var m ociartifact.Meta
	for n, i := range indexes {
		prov := plans[i].prov
		if prov == nil {
			return ociartifact.Meta{}
		}
		src := prov.Source
		rev := ""
		if src.Commit != "" {
			rev = src.Ref + "@sha1:" + src.Commit
			if src.Ref == "" {
				rev = "sha1:" + src.Commit
			}
		}
		if n == 0 {
			m = ociartifact.Meta{Source: src.Repo, Revision: rev}
		} else if m.Source != src.Repo || m.Revision != rev {
			return ociartifact.Meta{}
		}
	}
	return m
}

// locks says which folders of an artifact's files takeovers lock now
// ("" when none): the provenance records that hold an unexpired lock.
func (r *runner) locks(files map[string][]byte) string {
	var out []string
	for p, data := range files {
		if path.Base(p) != v1alpha1.ProvenanceFile {
			continue
		}
		prov, err := parseProvenance(data)
		if err != nil || prov.Takeover == nil || !prov.Takeover.Holds(r.o.Now()) {
			continue
		}
		out = append(out, fmt.Sprintf("%s holds %s until %s", prov.Takeover.Owner, path.Dir(p), prov.Takeover.Expires))
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// extendArtifactLock is ExtendLock in an OCI destination: the artifact
// as its tag holds it, the folder's takeover.expires rewritten, pushed
// and tagged as any other (signed as the sync asks).
func extendArtifactLock(ctx context.Context, ms config.ManifestSync, o Options, owner, expires string) (string, error) {
	r, p, dir, err := openOneArtifact(ctx, ms, o)
	if err != nil {
		return "", err
	}
	folder := strings.Trim(path.Clean(ms.Spec.Destination.Path), "/")
	file := path.Join(folder, v1alpha1.ProvenanceFile)
	data, ok, err := dir.ReadFile(file)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s in %s%s has no %s: %w", folder, v1alpha1.OCIScheme, p.artifact.tag, v1alpha1.ProvenanceFile, ErrNotLocked)
	}
	prov, err := parseProvenance(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if prov.Takeover == nil || prov.Takeover.Owner != owner {
		holder := "nobody"
		if prov.Takeover != nil {
			holder = prov.Takeover.Owner
		}
		return "", fmt.Errorf("%s in %s%s is held by %s, not %s: %w", folder, v1alpha1.OCIScheme, p.artifact.tag, holder, owner, ErrNotLocked)
	}
	if data, err = setExpires(data, expires); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	p.artifact.dir[file] = data
	signer, err := o.artifactSigner(ms)
	if err != nil {
		return "", err
	}
	res, err := r.pushStaged(ctx, p.artifact, ociartifact.Meta{}, signer, artifactsig.Provenance{Version: o.Version, Finished: r.o.Now()})
	if err != nil {
		return "", fmt.Errorf("pushing %s%s: %w", v1alpha1.OCIScheme, p.artifact.tag, err)
	}
	if !res.Pushed {
		return "", nil
	}
	return res.Digest.String(), nil
}

// signArtifact signs an artifact and attaches its SLSA provenance.
func (r *runner) signArtifact(ctx context.Context, ref name.Digest, a *artifact, signer artifactsig.Signer, prov artifactsig.Provenance) error {
	target := artifactsig.Target{Ref: ref, Remote: a.reg.PushOptions(ctx)}
	oras, err := a.reg.ORASRepository(ref.Context().Name())
	if err != nil {
		return err
	}
	target.ORAS = oras
	predicate, err := prov.Predicate()
	if err != nil {
		return err
	}
	return signer.Sign(ctx, target, artifactsig.SLSAPredicate, predicate)
}

// provenanceOf is what an artifact's attestation says of the syncs of
// indexes: each sync, its source, the folder it rendered from, its
// render settings, the images it pinned and its provenance record.
func (r *runner) provenanceOf(plans []*plan, indexes []int) artifactsig.Provenance {
	prov := artifactsig.Provenance{Version: r.o.Version, Finished: r.o.Now()}
	for _, i := range indexes {
		p := plans[i]
		sp := artifactsig.SyncProvenance{Name: p.ms.Name, Folder: p.dstPath, Record: p.folder[v1alpha1.ProvenanceFile]}
		if p.ms.Namespace != "" {
			sp.Name = p.ms.Namespace + "/" + p.ms.Name
		}
		if pv := p.prov; pv != nil {
			sp.Repo, sp.Ref, sp.Commit, sp.Paths = pv.Source.Repo, pv.Source.Ref, pv.Source.Commit, []string{pv.Source.Path}
			for _, img := range pv.Images {
				sp.Images = append(sp.Images, artifactsig.PinnedImage{Name: img.Name, Digest: img.Digest})
			}
			sp.Render = map[string]any{"deployer": pv.Deployer}
			if raw, err := json.Marshal(p.ms.Spec.Render); err == nil {
				var render map[string]any
				if json.Unmarshal(raw, &render) == nil && len(render) > 0 {
					sp.Render["render"] = render
				}
			}
		}
		prov.Syncs = append(prov.Syncs, sp)
	}
	return prov
}

// openOneArtifact reads the artifact of one sync's OCI destination
// outside a run (a prune, a lock extended): a runner of its own, the
// sync's plan and the artifact's files.
func openOneArtifact(ctx context.Context, ms config.ManifestSync, o Options) (*runner, *plan, folderReader, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &runner{o: o, artifacts: map[string]*artifact{}}
	p := &plan{ms: ms}
	dir, err := r.openArtifact(ctx, p)
	return r, p, dir, err
}

// pruneArtifact removes a deleted sync's folder from its OCI destination
// (spec.prune), as Prune does from a branch: if the folder is still the
// sync's and no takeover holds it, the artifact without it is pushed,
// signed as the sync asked, and the tag moved to it.
func pruneArtifact(ctx context.Context, ms config.ManifestSync, o Options) error {
	r, p, dir, err := openOneArtifact(ctx, ms, o)
	if err != nil {
		return err
	}
	folder := strings.Trim(path.Clean(ms.Spec.Destination.Path), "/")
	data, ok, err := dir.ReadFile(path.Join(folder, v1alpha1.ProvenanceFile))
	if err != nil || !ok {
		return err // nothing there
	}
	prov, err := parseProvenance(data)
	if err != nil {
		return fmt.Errorf("%s%s: %s: %w", v1alpha1.OCIScheme, p.artifact.tag, path.Join(folder, v1alpha1.ProvenanceFile), err)
	}
	if prov.Sync != ms.Name || (prov.Namespace != "" && prov.Namespace != ms.Namespace) {
		return nil // another sync's now
	}
	if t := prov.Takeover; t != nil && t.Holds(r.o.Now()) {
		return fmt.Errorf("%s's takeover holds %s until %s: the folder is removed once it ends", t.Owner, folder, t.Expires)
	}
	hashes, err := dir.Hashes(folder)
	if err != nil {
		return err
	}
	for f := range hashes {
		if strings.HasSuffix(f, "/"+v1alpha1.ProvenanceFile) {
			return fmt.Errorf("%s holds %s, the folder of another ManifestSync: it is not removed with %s", folder, path.Join(folder, path.Dir(f)), ms.Name)
		}
	}
	p.artifact.dir.removeFolder(folder)
	signer, err := o.artifactSigner(ms)
	if err != nil {
		return err
	}
	_, err = r.pushStaged(ctx, p.artifact, ociartifact.Meta{}, signer, artifactsig.Provenance{Version: o.Version, Finished: r.o.Now()})
	if err != nil {
		return fmt.Errorf("pushing %s%s: %w", v1alpha1.OCIScheme, p.artifact.tag, err)
	}
	return nil
}

// immutableTag is the tag of one hydration beside the moving one: the
// moving tag, the source commit when the syncs share one, and the
// content's digest (dev-1e2f3a4b5c6d-9a8b7c6d5e4f): the same name is
// never given to other content.
func immutableTag(moving string, img v1.Image, m ociartifact.Meta) (string, error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	if len(layers) == 0 {
		return "", errors.New("the artifact has no layer")
	}
	content, err := layers[0].Digest()
	if err != nil {
		return "", err
	}
	return immutableTagOf(moving, content, m.Revision), nil
}

// immutableTagOf is immutableTag of an artifact's content digest and
// revision.
func immutableTagOf(moving string, content v1.Hash, revision string) string {
	t := moving
	if _, commit, ok := strings.Cut(revision, "sha1:"); ok && len(commit) >= 12 {
		t += "-" + commit[:12]
	}
	return t + "-" + content.Hex[:12]
}
