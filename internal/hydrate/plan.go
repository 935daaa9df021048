package hydrate

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/pin"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/secrets"
	"sluice.dev/sluice/internal/source"
)

// remoteInput is the hash of an input fetched from outside the source
// tree: it cannot vouch for itself.
const remoteInput = "remote"

// plan is one sync worked out up to the write: its new folder, or the
// finding that the destination already holds it.
type plan struct {
	ms  config.ManifestSync
	err error

	src     *sourceTree
	dstRepo *source.Repo
	// artifact is the OCI destination the folder goes to (nil for git).
	artifact *artifact
	branch   string // the branch written: the destination's, or the review branch
	from     string // where a missing branch starts
	dstPath  string
	tip      string         // the destination commit read
	was      *plumbing.Hash // the folder's tree as read from the branch (nil: read from a directory)

	prev     *v1alpha1.Provenance
	prov     *v1alpha1.Provenance
	locked   *v1alpha1.Takeover // the lock that kept this run out
	folder   destination.Folder // nil: nothing to write
	rendered bool
	diff     string
	diffCut  bool     // diff kept to DiffLimit
	changes  *Changes // dry runs
	stale    []string // tags answered stale, and why (Result.Stale)
	// values are the secret values the render generated: masked in
	// whatever the plan's result says (a dry run's diff, an error).
	values *mask.Set
	// secretKeys say what became of each key of each Secret encrypted
	// (dry runs' diffs).
	secretKeys map[string]map[string]secrets.KeyChange
}

func (p *plan) result() Result {
	d := p.ms.Spec.Destination
	p.err = p.values.Error(p.err)
	res := Result{
		Name:        p.ms.Name,
		Result:      Unchanged,
		Commit:      p.tip,
		Destination: fmt.Sprintf("%s %s %s", source.Redact(d.Repo), p.branch, d.Path),
		Rendered:    p.rendered,
		Diff:        p.diff,
		DiffCut:     p.diffCut,
		Changes:     p.changes,
		Stale:       p.stale,
		Err:         p.err,
	}
	res.Branch = p.branch
	if p.branch == "" {
		res.Destination = fmt.Sprintf("%s %s %s", source.Redact(d.Repo), d.Target(), d.Path)
		res.Branch = d.Target()
	}
	if p.prov != nil {
		res.Images = p.prov.Images
		res.Source = describeSource(p.prov.Source)
		src := p.prov.Source
		res.Revision = &src
		res.Deployer, res.Warnings, res.Generated, res.Lookups, res.Secrets = p.prov.Deployer, p.values.Strings(slices.Clone(p.prov.Warnings)), p.prov.Generated, p.prov.Lookups, p.prov.Secrets
	}
	if c := p.changes; c != nil && !p.values.Empty() {
		masked := &Changes{Added: slices.Clone(c.Added), Changed: slices.Clone(c.Changed), Removed: slices.Clone(c.Removed), Repinned: slices.Clone(c.Repinned)}
		for _, l := range [][]string{masked.Added, masked.Changed, masked.Removed, masked.Repinned} {
			p.values.Strings(l)
		}
		res.Changes = masked
	}
	if p.folder != nil {
		res.Result = Changed
	}
	if p.locked != nil {
		res.Result, res.Lock = Locked, p.locked
	}
	return res
}

func describeSource(s v1alpha1.ProvenanceSource) string {
	out := s.Repo + " " + s.Path
	if s.Commit != "" {
		out += "@" + short(s.Commit)
	}
	if s.Dirty {
		out += "+dirty"
	}
	return out
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// folderReader reads the current content of destination folders: a
// branch, or a local directory.
type folderReader interface {
	TreeHash(folder string) (string, bool, error)
	Hashes(folder string) (map[string]string, error)
	ReadFile(p string) ([]byte, bool, error)
	ReadFolder(folder string) (destination.Folder, error)
}

func (r *runner) plan(ctx context.Context, ms config.ManifestSync) *plan {
	start := time.Now()
	p := &plan{ms: ms, dstPath: ms.Spec.Destination.Path}
	p.err = r.work(ctx, p)
	r.o.Log.Debug("sync planned", "sync", ms.Name, "rendered", p.rendered, "changed", p.folder != nil, "elapsed", time.Since(start))
	return p
}

func (r *runner) work(ctx context.Context, p *plan) error {
	ms := p.ms
	// The source opens while the destination is read and the registry
	// asked about the images last pinned: all three mostly wait.
	type opened struct {
		src *sourceTree
		err error
	}
	srcDone := make(chan opened, 1)
	go func() {
		src, err := r.openSource(ctx, ms)
		srcDone <- opened{src, err}
	}()
	current, err := r.openDestination(ctx, p)
	var cur *currentFolder
	if err == nil {
		if cur, err = r.readFolder(current, p.dstPath); err != nil {
			err = fmt.Errorf("reading destination %s: %w", p.dstPath, err)
		}
	}
	if b, ok := current.(*destination.Branch); ok && err == nil && b.Name() == p.branch {
		// The folder as read: the write gives up if someone else writes
		// it meanwhile (a replica that no longer leads, a racing CI job),
		// rather than put this older plan over theirs.
		was := plumbing.ZeroHash
		if cur.tree != "" {
			was = plumbing.NewHash(cur.tree)
		} else if h, ok, terr := b.TreeHash(p.dstPath); terr == nil && ok {
			was = plumbing.NewHash(h)
		}
		p.was = &was
	}
	if err == nil && cur.prov != nil && !r.o.Force {
		r.prefetch(ctx, ms, cur.prov)
	}
	o := <-srcDone
	if o.err != nil {
		return o.err
	}
	if err != nil {
		return err
	}
	src := o.src
	p.src = src
	p.prev = cur.prov
	if err := claimed(current, p.dstPath, ms.Namespace, ms.Name, cur); err != nil {
		return err
	}
	if lock := r.lockOf(p.prev); lock != nil {
		if r.o.Takeover != nil {
			return fmt.Errorf("%s is taken over by %s until %s: ask them to run `sluice takeover release`, wait, or use --steal", p.dstPath, lock.Owner, lock.Expires)
		}
		p.locked = lock
		return nil
	}
	if r.o.Only != nil && !r.o.Only(ms, p.prev) {
		p.prov = p.prev
		return nil
	}
	pinner := r.pinner(ms, src.Commit)
	// A takeover always writes its record (and extends its lock); a
	// folder a takeover wrote goes back to the regular render.
	shortcut := !r.o.Force && r.o.Takeover == nil && p.prev != nil && p.prev.Takeover == nil
	if shortcut && r.unchanged(ctx, p, pinner, cur) {
		p.prov = p.prev
		return nil
	}

	select {
	case r.renders <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The slot is the render's: pinning waits on registries, and the next
	// render may run meanwhile.
	held := true
	release := func() {
		if held {
			<-r.renders
			held = false
		}
	}
	defer release()
	p.rendered = true
	r.o.Log.Debug("rendering", "sync", ms.Name, "source", src.Describe(), "path", ms.Spec.Source.Path)
	ro := render.Options{
		Render: ms.Spec.Render, ReleaseName: ms.Name, Charts: r.o.charts(ms), Limits: r.o.Limits, Egress: r.egress,
		Generate: r.generate(ms),
	}
	if !r.o.NoRemoteBases {
		ro.Bases, ro.Fetch = r.openBase, render.FetchFiles(nil)
	}
	var res *render.Result
	if r.o.Sandbox != nil {
		res, err = r.o.Sandbox.RenderIn(ctx, renderDomain(ms, src), src.FS, ms.Spec.Source.Path, ro)
	} else {
		res, err = render.Render(ctx, src.FS, ms.Spec.Source.Path, ro)
	}
	if err != nil {
		return fmt.Errorf("rendering %s %s: %w", src.Describe(), ms.Spec.Source.Path, err)
	}
	objs, err := res.Nodes()
	if err != nil {
		return fmt.Errorf("rendering %s %s: %w", src.Describe(), ms.Spec.Source.Path, err)
	}
	release()
	if res.Renderer.Name == render.Helm {
		ns := ""
		if r := ms.Spec.Render; r != nil && r.Helm != nil {
			ns = r.Helm.Namespace
		}
		render.ReleaseNamespace(objs, ns)
	}
	p.values = mask.New(res.Values...)
	// Before anything leaves: an image reference is sent to its
	// registry to be pinned.
	if err := refuseGenerated(ms, objs, p.values); err != nil {
		return err
	}
	written := pin.Images(objs)
	images, err := pinner.Pin(ctx, objs, ms.Spec.Images)
	if err != nil {
		return fmt.Errorf("pinning: %w", err)
	}
	waiting := waitingImages(written, ms.Spec.Images, images)
	folder, dep, err := r.forDeployer(ctx, p, res, objs, current)
	if err != nil {
		return err
	}
	p.secretKeys = dep.keys
	inputs := res.Inputs
	for _, u := range res.Remote {
		inputs = append(inputs, v1alpha1.Input{Path: u, Hash: remoteInput})
	}
	prov := &v1alpha1.Provenance{
		APIVersion: v1alpha1.APIVersion,
		Kind:       v1alpha1.KindProvenance,
		Sync:       ms.Name,
		Namespace:  ms.Namespace,
		Source:     src.provenance(ms.Spec.Source, inputs),
		Renderer:   res.Renderer,
		Render:     ms.Spec.Render,
		Rules:      ms.Spec.Images,
		Images:     images,
		Waiting:    waiting,
		Inputs:     inputs,
		Trees:      source.Trees(src.FS, inputs),
		Chart:      res.Chart,
		Manifests:  destination.Digest(folder.Hashes()),
		Deployer:   ms.Spec.DeployerTool(),
		Hooks:      dep.hooks,
		Generated:  res.Generated,
		Lookups:    res.Lookups,
		Secrets:    dep.secrets,
		Warnings:   dep.warnings,
	}
	prov.Fingerprint = fingerprint(ms.ManifestSync, prov.Renderer, prov.Inputs, prov.Chart, prov.Images, keyID(r.syncKey(ms), usedKey(prov)))
	if t := r.o.Takeover; t != nil {
		prov.Takeover = src.takeover(*t, inputs)
		prov.Takeover.Unverified = ms.Spec.Source.Verify != nil && src.Working()
	}
	data, err := marshalProvenance(prov)
	if err != nil {
		return err
	}
	folder[v1alpha1.ProvenanceFile] = data
	folder[v1alpha1.SourceIgnoreFile] = []byte(v1alpha1.SourceIgnore)
	p.prov = prov
	tree, err := folder.TreeHash()
	if err != nil {
		return err
	}
	r.provenance.put("tree:"+tree, prov)
	if cur.tree != "" && cur.tree == tree {
		return nil // same bytes: a new commit of unrelated files, or --force
	}
	if cur.tree == "" {
		hashes, err := cur.hashes()
		if err != nil {
			return err
		}
		if maps.Equal(folder.Hashes(), hashes) {
			return nil
		}
	}
	p.folder = folder
	if r.o.DryRun {
		old, err := current.ReadFolder(p.dstPath)
		if err != nil {
			return err
		}
		p.diff, p.diffCut = diffFolders(p.dstPath, old, folder, r.o.ManifestsDiff, r.o.DiffLimit, p.secretKeys, p.values)
		var was []v1alpha1.PinnedImage
		if p.prev != nil {
			was = p.prev.Images
		}
		p.changes = folderChanges(old, folder, was, prov.Images)
	}
	return nil
}

// claimed refuses a folder another sync owns: the folder itself, one
// above it or one inside it holds another sync's provenance record.
// Within one run, overlapping folders are refused before anything runs;
// this finds what earlier runs, of other files, left in the branch.
func claimed(current folderReader, dir, namespace, name string, cur *currentFolder) error {
	// A record without a namespace (the command line's) is taken by a
	// sync of the same name in any namespace: how a team moves its syncs
	// from the command line to the controller.
	if p := cur.prov; p != nil && p.Sync != "" && (p.Sync != name || p.Namespace != "" && p.Namespace != namespace) {
		owner := p.Sync
		if p.Namespace != "" {
			owner = p.Namespace + "/" + p.Sync
		}
		return fmt.Errorf("%s is the folder of ManifestSync %s (its %s says so), and a sync never takes over another's folder: remove %s from the branch first if %s replaces %s", dir, owner, v1alpha1.ProvenanceFile, dir, name, owner)
	}
	for d := path.Dir(dir); d != "." && d != "/"; d = path.Dir(d) {
		data, ok, err := current.ReadFile(path.Join(d, v1alpha1.ProvenanceFile))
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%s is inside %s, the folder of ManifestSync %s: a sync writes only a folder no other sync's holds", dir, d, syncOf(data))
		}
	}
	if cur.verified {
		return nil // what this sync wrote itself: nothing nested
	}
	hashes, err := cur.hashes()
	if err != nil {
		return err
	}
	for f := range hashes {
		if strings.HasSuffix(f, "/"+v1alpha1.ProvenanceFile) {
			nested := path.Join(dir, path.Dir(f))
			data, _, _ := current.ReadFile(path.Join(dir, f))
			return fmt.Errorf("%s holds %s, the folder of ManifestSync %s: a sync writes only a folder no other sync's holds", dir, nested, syncOf(data))
		}
	}
	return nil
}

// syncOf names the sync a provenance record is of.
func syncOf(data []byte) string {
	if p, err := parseProvenance(data); err == nil && p.Sync != "" {
		return p.Sync
	}
	return "(unreadable)"
}

// lockOf returns the takeover that locks a folder against this run: an
// unexpired one of another owner (the run's own takeover, its Release,
// and Steal pass).
func (r *runner) lockOf(prev *v1alpha1.Provenance) *v1alpha1.Takeover {
	if prev == nil || prev.Takeover == nil {
		return nil
	}
	lock := prev.Takeover
	if !lock.Holds(r.o.Now()) {
		return nil
	}
	switch {
	case r.o.Steal, r.o.Release != "" && r.o.Release == lock.Owner, r.o.Takeover != nil && r.o.Takeover.Owner == lock.Owner:
		return nil
	}
	return lock
}

// prefetch starts resolving, in the background, the images a folder was
// last pinned with, so the answers are in when the check needs them. Only
// strategies that need no source commit can start this early.
func (r *runner) prefetch(ctx context.Context, ms config.ManifestSync, prev *v1alpha1.Provenance) {
	pinner := r.pinner(ms, "")
	for _, img := range prev.Images {
		rule, ok := pin.Match(ms.Spec.Images, pin.ParseRef(img.From).Repo)
		if ok && rule.Strategy != v1alpha1.StrategySourceCommit {
			go pinner.ResolveRules(ctx, img.From, ms.Spec.Images)
		}
	}
}

// currentFolder is a destination folder as found.
type currentFolder struct {
	tree string // its git tree hash, when known
	prov *v1alpha1.Provenance
	// verified says the folder's manifests are known to match prov.
	verified bool
	hashes   func() (map[string]string, error)
}

// readFolder finds a destination folder's provenance record. A folder
// whose tree hash the cache knows needs no read at all: the hash vouches
// for every byte in it. Otherwise the record is read and parsed; a folder
// without one, or with an unreadable one, has no provenance (and renders
// anew).
func (r *runner) readFolder(current folderReader, dir string) (*currentFolder, error) {
	c := &currentFolder{}
	var hashes map[string]string
	var herr error
	loaded := false
	c.hashes = func() (map[string]string, error) {
		if !loaded {
			hashes, herr = current.Hashes(dir)
			loaded = true
		}
		return hashes, herr
	}
	tree, ok, err := current.TreeHash(dir)
	if err != nil {
		return nil, err
	}
	if ok {
		c.tree = tree
		if p := r.provenance.get("tree:" + tree); p != nil {
			c.prov, c.verified = p, true
			return c, nil
		}
	}
	hs, err := c.hashes()
	if err != nil || hs == nil {
		return c, err
	}
	blob, ok := hs[v1alpha1.ProvenanceFile]
	if !ok {
		return c, nil
	}
	if c.prov = r.provenance.get("blob:" + blob); c.prov == nil {
		data, ok, err := current.ReadFile(path.Join(dir, v1alpha1.ProvenanceFile))
		if err != nil || !ok {
			return c, err
		}
		if c.prov, err = parseProvenance(data); err != nil {
			c.prov = nil
			return c, nil
		}
		r.provenance.put("blob:"+blob, c.prov)
	}
	if destination.Digest(hs) == c.prov.Manifests {
		c.verified = true
		if c.tree != "" {
			r.provenance.put("tree:"+c.tree, c.prov)
		}
	}
	return c, nil
}

// unchanged reports whether the destination folder is what a render would
// give now, without rendering: it holds the provenance's manifests, every
// input has its recorded hash, and every image and chart resolves as
// recorded.
func (r *runner) unchanged(ctx context.Context, p *plan, pinner *pin.Pinner, cur *currentFolder) bool {
	prev, ms := p.prev, p.ms
	if prev.Sync != ms.Name || !cur.verified {
		return false
	}
	if prev.Renderer.Version != render.Version(prev.Renderer.Name) {
		return false
	}
	for _, in := range prev.Inputs {
		if in.Hash == remoteInput {
			return false // a remote base or file may have moved: render
		}
	}
	sameCommit := p.src.Tree != nil && prev.Source.Commit == p.src.Commit
	if !sameCommit && !source.Unchanged(p.src.FS, prev.Inputs, prev.Trees) {
		return false
	}
	chart := prev.Chart
	if chart != nil {
		h := ms.Spec.Render
		if h == nil || h.Helm == nil || h.Helm.Chart == nil {
			return false
		}
		now, err := r.o.charts(ms).Resolve(ctx, *h.Helm.Chart)
		if err != nil || now != *chart {
			return false
		}
	}
	images := make([]v1alpha1.PinnedImage, 0, len(prev.Images))
	for _, img := range prev.Images {
		now, ok, err := pinner.ResolveRules(ctx, img.From, ms.Spec.Images)
		if err != nil || !ok {
			return false // the render reports it, or pins differently
		}
		images = append(images, now)
	}
	for _, from := range prev.Waiting {
		if _, ok, err := pinner.ResolveRules(ctx, from, ms.Spec.Images); ok || err != nil {
			return false // its tag appeared
		}
	}
	return fingerprint(ms.ManifestSync, prev.Renderer, prev.Inputs, chart, images, keyID(r.syncKey(ms), usedKey(prev))) == prev.Fingerprint
}

// waitingImages lists the references a rule matched that were not pinned:
// only optional rules matched them, and their tags do not exist yet.
func waitingImages(written []string, rules []v1alpha1.ImageRule, pinned []v1alpha1.PinnedImage) []string {
	done := map[string]bool{}
	for _, p := range pinned {
		done[p.From] = true
	}
	var out []string
	for _, from := range written {
		if _, ok := pin.Match(rules, pin.ParseRef(from).Repo); ok && !done[from] {
			out = append(out, from)
		}
	}
	return out
}

// openDestination opens where the folder goes and returns a reader of its
// current content.
func (r *runner) openDestination(ctx context.Context, p *plan) (folderReader, error) {
	d := p.ms.Spec.Destination
	p.branch = d.Branch
	read := ""
	switch d.Mode {
	case v1alpha1.ModeBranch:
		p.branch, p.from = d.ReviewBranch(p.ms.Name), d.Branch
	case v1alpha1.ModePullRequest:
		// Compared with what the base holds: a folder that goes back to
		// it is nothing to propose.
		p.branch, read = d.PullRequestBranch(), d.Branch
	}
	if r.o.OutDir != "" {
		return destination.Dir{Root: path.Join(r.o.OutDir, d.Target())}, nil
	}
	if d.IsOCI() {
		return r.openArtifact(ctx, p)
	}
	loc, err := source.ParseLocation(d.Repo, p.ms.Origin.Dir)
	if err != nil {
		return nil, fmt.Errorf("spec.destination.repo: %w", err)
	}
	_, creds := r.o.credentials(p.ms)
	repo, err := r.o.Cache.Open(ctx, loc, source.OpenOptions{Create: true, Credentials: creds})
	if err != nil {
		return nil, fmt.Errorf("opening destination: %w", err)
	}
	p.dstRepo = repo
	if read == "" {
		read = p.branch
	}
	b, err := r.openBranch(repo, read)
	if err != nil {
		return nil, err
	}
	if !b.Exists() && p.from != "" {
		// No review branch yet: compare with the branch it would propose to.
		if b, err = r.openBranch(repo, p.from); err != nil {
			return nil, err
		}
	}
	if b.Exists() {
		p.tip = b.Tip().String()
	}
	return b, nil
}

// openBranch reads a branch once per run, however many syncs share it.
func (r *runner) openBranch(repo *source.Repo, name string) (*destination.Branch, error) {
	key := fmt.Sprintf("%p#%s", repo, name) // one clone's branch: clones of other credentials are apart
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.branches[key]; ok {
		return b, nil
	}
	b, err := destination.Open(repo, name)
	if err != nil {
		return nil, err
	}
	r.branches[key] = b
	return b, nil
}

// writeDir writes the folder under an output directory instead of git.
func (p *plan) writeDir(out destination.Dir) Result {
	d := p.ms.Spec.Destination
	root := destination.Dir{Root: path.Join(out.Root, d.Target())}
	if err := root.WriteFolder(d.Path, p.folder); err != nil {
		p.err = fmt.Errorf("writing %s: %w", path.Join(root.Root, d.Path), err)
	}
	return p.result()
}

// pinner pins a sync's images, checking the signatures its rules ask for.
func (r *runner) pinner(ms config.ManifestSync, commit string) *pin.Pinner {
	reg := r.o.registry(ms)
	p := &pin.Pinner{Registry: reg, Commit: commit}
	if r.o.ImagePolicyFor != nil {
		p.Verify = func(ctx context.Context, rule v1alpha1.ImageRule, repo, digest string) (string, error) {
			pol, err := r.o.ImagePolicyFor(ms, rule)
			if err != nil {
				return "", err
			}
			return r.o.ImagesVerified.Verify(ctx, reg, repo, digest, pol)
		}
	}
	return p
}

// renderDomain is the trust domain of a sync's render: its namespace and
// source commit, whose renders may share a warm worker. A working tree
// (no commit's tree) is a domain of its own.
func renderDomain(ms config.ManifestSync, src *sourceTree) sandbox.Domain {
	if src.Tree == nil || src.Commit == "" {
		return sandbox.Domain{}
	}
	return sandbox.Domain{Namespace: ms.Namespace, Source: source.Redact(ms.Spec.Source.Repo) + "@" + src.Commit}
}
