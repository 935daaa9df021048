// Package review answers the question a reviewer asks of a change to a
// source repository (a pull request): what will it change in every
// deploy folder? It merges the change's head onto its base as the forge
// would, renders, in a dry run of the very engine that commits, every
// sync whose inputs the change reaches (the files each sync's folder
// records it read), and compares with what each folder holds. It writes
// nothing anywhere but the merge commit in its own clone.
package review

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/forge"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/synckey"
)

// Change is a change to a source repository: a pull request, or any two
// refs.
type Change struct {
	// Repo is the source repository, as the syncs name it.
	Repo string
	// Base is the branch the change merges into.
	Base string
	// Head is what merges: a branch, a full commit SHA the clone holds,
	// or a ref a forge keeps for a pull request (refs/pull/7/head on
	// GitHub and Gitea, refs/merge-requests/7/head on GitLab), fetched.
	Head string
	// HeadCommit, if set, is the commit the head must be at (a webhook's
	// word): a head that has moved on since is previewed at this commit
	// if the clone holds it, refused if not.
	HeadCommit string
}

// Options tune a Run.
type Options struct {
	// Hydrate are the engine's options: Cache and Registry required, the
	// sandbox, limits and credentials as the syncs' hydrations have
	// them. Run makes it a dry run; nothing is written.
	Hydrate hydrate.Options
	// BaseDir is what a relative Change.Repo is relative to.
	BaseDir string
	// Post, if set, posts the preview on the pull request: a pending
	// status on its head first, then the comment and the final status.
	Post *Post
	// DiffLimit, if set, keeps at most this many bytes of each folder's
	// diff (a comment shows less anyway): a change of 100,000 lines is
	// then held as that many bytes, not all of it.
	DiffLimit int
	// Untrusted previews a change from outside (a fork's pull request):
	// the values charts generate derive from a throwaway key, never from
	// the sync key, so that no template of the change's can print what
	// the sync key derives. Without a sync key the same is done.
	Untrusted bool
}

// Post is where a preview is posted.
type Post struct {
	// Forge is the forge's kind (v1alpha1.Forge*; "" tells it from the
	// host).
	Forge string
	// Number is the pull request's.
	Number int
	// Credentials reach the forge's API; empty: those the source
	// repository is read with.
	Credentials forge.Credentials
	// Format is the comment's: the forge's limit, where to read the rest.
	Format Format
	// TargetURL, if set, is what the status links to (the dashboard's
	// page of the pull request); the default is the comment.
	TargetURL string
}

// Report is what a change does to the folders of the syncs that follow
// its base.
type Report struct {
	Repo string `json:"repo"`
	Base string `json:"base"`
	Head string `json:"head"`
	// BaseCommit, HeadCommit and Merge are the commits read: the base's
	// tip, the head, and the head merged onto the base (what was
	// rendered).
	BaseCommit string `json:"baseCommit,omitempty"`
	HeadCommit string `json:"headCommit,omitempty"`
	Merge      string `json:"merge,omitempty"`
	// Unmergeable says why the head cannot be merged onto the base (then
	// nothing is rendered).
	Unmergeable string `json:"unmergeable,omitempty"`
	// Following is how many syncs follow the base: those the change could
	// reach.
	Following int `json:"following"`
	// Syncs are the syncs the change reaches, by destination and folder.
	Syncs []Sync `json:"syncs,omitempty"`
	// Notes say what the preview could not do as a hydration would.
	Notes []string `json:"notes,omitempty"`
}

// Sync is what the change does to one sync's folder.
type Sync struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	// Repo (without credentials), Branch and Path are the folder's
	// destination.
	Repo   string `json:"repo"`
	Branch string `json:"branch"`
	Path   string `json:"path"`
	// Changes count what changes, object by object; nil when nothing
	// does or the render failed.
	Changes *hydrate.Changes `json:"changes,omitempty"`
	// Diff is the folder's diff, no Secret's value in it; DiffCut says it
	// was kept to Options.DiffLimit.
	Diff    string `json:"diff,omitempty"`
	DiffCut bool   `json:"diffCut,omitempty"`
	// Error is why the render failed.
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Changed reports whether the sync's folder changes.
func (s Sync) Changed() bool { return !s.Changes.Empty() || s.Diff != "" }

// Failed reports whether the change cannot be merged or a render of it
// fails: what a required check refuses.
func (r *Report) Failed() bool {
	if r.Unmergeable != "" {
		return true
	}
	for _, s := range r.Syncs {
		if s.Error != "" {
			return true
		}
	}
	return false
}

// Changed reports whether any folder changes.
func (r *Report) Changed() bool {
	for _, s := range r.Syncs {
		if s.Changed() {
			return true
		}
	}
	return false
}

// Counts are the folders that change and the renders that fail.
func (r *Report) Counts() (changed, failed int) {
	for _, s := range r.Syncs {
		switch {
		case s.Error != "":
			failed++
		case s.Changed():
			changed++
		}
	}
	return changed, failed
}

// Summary is the report in one line, as a commit status says it:
// "3 folders change, 1 render fails".
func (r *Report) Summary() string {
	if r.Unmergeable != "" {
		return "cannot be merged onto " + r.Base
	}
	changed, failed := r.Counts()
	var parts []string
	switch changed {
	case 0:
	case 1:
		parts = append(parts, "1 folder changes")
	default:
		parts = append(parts, fmt.Sprintf("%d folders change", changed))
	}
	switch failed {
	case 0:
	case 1:
		parts = append(parts, "1 render fails")
	default:
		parts = append(parts, fmt.Sprintf("%d renders fail", failed))
	}
	if len(parts) == 0 {
		return "nothing deployable changes"
	}
	return strings.Join(parts, ", ")
}

// clone is one clone of the source repository, and the merge in it.
type clone struct {
	base, head, merge source.Commit
	baseFS, mergeFS   source.FS
	err               error
	unmergeable       string
}

// Run previews ch: it renders each of syncs that follows ch's base and
// whose inputs ch reaches, at ch's head merged onto its base, and
// compares with its folder.
func Run(ctx context.Context, syncs []config.ManifestSync, ch Change, o Options) (*Report, error) {
	if o.Post == nil {
		return run(ctx, syncs, ch, o, nil)
	}
	var reviewer forge.Reviewer
	pending := func(repo *source.Repo, head plumbing.Hash) error {
		c := o.Post.Credentials
		if c.Password == "" {
			c.Username, c.Password = repo.APICredentials()
		}
		loc := repo.Location()
		r, err := forge.ReviewerFor(o.Post.Forge, loc.URL, c)
		if err != nil {
			return fmt.Errorf("posting on pull request %d: %w", o.Post.Number, err)
		}
		reviewer = r
		ch.HeadCommit = head.String()
		return Pending(ctx, r, head.String(), o.Post.TargetURL)
	}
	rep, err := run(ctx, syncs, ch, o, pending)
	if err != nil {
		if reviewer != nil {
			// No pending status left behind: the check says it failed.
			_ = reviewer.Status(ctx, ch.HeadCommit, forge.Status{Context: StatusContext, State: forge.StateError, Description: "the preview failed: " + err.Error(), TargetURL: o.Post.TargetURL})
		}
		return rep, err
	}
	if reviewer == nil {
		return rep, nil // no sync follows the base: nothing to say
	}
	_, err = Publish(ctx, reviewer, o.Post.Number, rep, o.Post.Format, o.Post.TargetURL)
	return rep, err
}

// run is Run; pending, if set, is told the head of the first clone
// merged, before anything renders.
func run(ctx context.Context, syncs []config.ManifestSync, ch Change, o Options, pending func(*source.Repo, plumbing.Hash) error) (*Report, error) {
	loc, err := source.ParseLocation(ch.Repo, o.BaseDir)
	if err != nil {
		return nil, fmt.Errorf("the change's repository: %w", err)
	}
	if ch.Base == "" || ch.Head == "" {
		return nil, errors.New("a change names its base branch and its head")
	}
	if ch.HeadCommit != "" && !plumbing.IsHash(ch.HeadCommit) {
		return nil, fmt.Errorf("head commit %q: not a full commit SHA", ch.HeadCommit)
	}
	rep := &Report{Repo: source.Redact(loc.Repository()), Base: ch.Base, Head: ch.Head}
	clones := map[*source.Repo]*clone{}
	var (
		following []config.ManifestSync
		cloneOf   = map[string]*clone{}
	)
	for _, ms := range syncs {
		sl, err := source.ParseLocation(ms.Spec.Source.Repo, ms.Origin.Dir)
		if err != nil || sl.Repository() != loc.Repository() {
			continue
		}
		ref := ms.Spec.Source.Ref
		if sl.Ref != "" {
			ref = sl.Ref
		}
		if sl.IsLocal() && ref == "" && !source.IsBare(sl.Path) {
			continue // a working tree follows no branch
		}
		var creds *source.Credentials
		if o.Hydrate.Credentials != nil {
			creds, _ = o.Hydrate.Credentials(ms)
		}
		repo, err := o.Hydrate.Cache.Open(ctx, sl, source.OpenOptions{Credentials: creds})
		if err != nil {
			return nil, fmt.Errorf("ManifestSync %s: source: %w", ms.Name, err)
		}
		if ref == "" {
			ref = repo.DefaultBranch()
		}
		if ref != ch.Base && ref != "refs/heads/"+ch.Base {
			continue
		}
		c, ok := clones[repo]
		if !ok {
			c = merge(ctx, repo, ch)
			clones[repo] = c
			if c.err == nil && pending != nil && len(clones) == 1 {
				if err := pending(repo, c.head.Hash); err != nil {
					return nil, err
				}
			}
		}
		if c.err != nil {
			return nil, c.err
		}
		following = append(following, ms)
		cloneOf[key(ms)] = c
		rep.BaseCommit, rep.HeadCommit = c.base.Hash.String(), c.head.Hash.String()
		if c.unmergeable != "" {
			rep.Unmergeable = c.unmergeable
		} else {
			rep.Merge = c.merge.Hash.String()
		}
	}
	rep.Following = len(following)
	if rep.Unmergeable != "" || len(following) == 0 {
		return rep, nil
	}

	// Each sync, pointed at the merge: rendered only where the change
	// reaches its inputs.
	retargeted := make([]config.ManifestSync, len(following))
	for i, ms := range following {
		cp := *ms.ManifestSync
		cp.Spec = *ms.Spec.DeepCopy()
		repoURL, _, _ := strings.Cut(cp.Spec.Source.Repo, "?")
		cp.Spec.Source.Repo, cp.Spec.Source.Ref = repoURL, cloneOf[key(ms)].merge.Hash.String()
		cp.Spec.Source.Verify = nil // the merge is Sluice's own commit: nobody signed it
		retargeted[i] = config.ManifestSync{ManifestSync: &cp, Origin: ms.Origin}
	}
	reached := map[string]bool{}
	ho := o.Hydrate
	ho.DiffLimit = o.DiffLimit
	ho.DryRun, ho.ManifestsDiff, ho.Force, ho.OutDir, ho.Takeover, ho.Release, ho.Progress = true, true, false, "", nil, "", nil
	throwaway := ""
	if o.Untrusted || ho.SyncKey.IsZero() {
		ho.SyncKey = synckey.New()
		throwaway = "no sync key was given"
		if o.Untrusted {
			throwaway = "the change comes from outside the repository"
		}
	}
	ho.Only = func(ms config.ManifestSync, prev *v1alpha1.Provenance) bool {
		c := cloneOf[key(ms)]
		var touched bool
		if prev == nil {
			// A folder not hydrated yet: the change reaches it if it
			// changes anything under the sync's source path.
			touched = changedUnder(c, ms.Spec.Source.Path)
		} else {
			touched = source.Differ(c.baseFS, c.mergeFS, prev.Inputs)
		}
		if touched {
			reached[key(ms)] = true
		}
		return touched
	}
	hr, err := hydrate.Run(ctx, retargeted, ho)
	if err != nil {
		return nil, err
	}
	for i, res := range hr.Results {
		ms := following[i]
		if !reached[key(ms)] && res.Err == nil {
			continue
		}
		d := ms.Spec.Destination
		s := Sync{Name: ms.Name, Namespace: ms.Namespace, Repo: source.Redact(d.Repo), Branch: res.Branch, Path: d.Path,
			Diff: res.Diff, DiffCut: res.DiffCut, Warnings: res.Warnings}
		if s.Branch == "" {
			s.Branch = d.Branch
		}
		if res.Err != nil {
			s.Error = res.Err.Error()
		} else if !res.Changes.Empty() {
			s.Changes = res.Changes
		}
		rep.Syncs = append(rep.Syncs, s)
		if throwaway != "" && len(res.Generated) > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the values its chart generates (passwords, keys, certificates) show as changed: %s, so they derive from a throwaway key, not from the sync key.", ms.Name, throwaway))
		}
	}
	sort.SliceStable(rep.Syncs, func(i, j int) bool {
		a, b := rep.Syncs[i], rep.Syncs[j]
		if a.Repo != b.Repo {
			return a.Repo < b.Repo
		}
		if a.Branch != b.Branch {
			return a.Branch < b.Branch
		}
		return a.Path < b.Path
	})
	return rep, nil
}

// InvalidError is returned by RunFiles when the resources do not load:
// nothing ran.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// RunFiles previews ch for the ManifestSyncs in the given files and
// directories, those named (all when names is empty). An empty ch.Repo
// is the one source repository the syncs read, if they read one.
func RunFiles(ctx context.Context, paths, names []string, ch Change, o Options) (*Report, error) {
	set, err := config.Load(paths...)
	if err != nil {
		return nil, &InvalidError{err}
	}
	syncs, err := set.Named(names)
	if err != nil {
		return nil, &InvalidError{fmt.Errorf("%w in %s", err, strings.Join(paths, " "))}
	}
	o.Hydrate.Cache.Trust(set.Repos()...)
	if ch.Repo == "" {
		repos := map[string]string{}
		for _, ms := range syncs {
			if loc, err := source.ParseLocation(ms.Spec.Source.Repo, ms.Origin.Dir); err == nil {
				repos[loc.Repository()] = ms.Spec.Source.Repo
				o.BaseDir = ms.Origin.Dir
			}
		}
		if len(repos) != 1 {
			var all []string
			for r := range repos {
				all = append(all, source.Redact(r))
			}
			sort.Strings(all)
			return nil, &InvalidError{fmt.Errorf("the syncs read %d repositories (%s): name the one the change is to", len(repos), strings.Join(all, ", "))}
		}
		for _, r := range repos {
			ch.Repo, _, _ = strings.Cut(r, "?")
		}
	}
	return Run(ctx, syncs, ch, o)
}

func key(ms config.ManifestSync) string { return ms.Namespace + "/" + ms.Name }

// merge resolves the change's base and head in a clone and merges them.
func merge(ctx context.Context, repo *source.Repo, ch Change) *clone {
	c := &clone{}
	var err error
	if c.base, err = repo.Resolve(ch.Base); err != nil {
		c.err = fmt.Errorf("the base: %w", err)
		return c
	}
	head, err := resolveHead(ctx, repo, ch)
	if err != nil {
		c.err = fmt.Errorf("the head %s: %w", ch.Head, err)
		return c
	}
	if c.head, err = repo.Resolve(head.String()); err != nil {
		c.err = fmt.Errorf("the head %s: %w", ch.Head, err)
		return c
	}
	c.merge, err = repo.Merge(c.base.Hash, c.head.Hash)
	var conflict *source.ConflictError
	switch {
	case errors.As(err, &conflict):
		c.unmergeable = conflict.Error()
		return c
	case err != nil:
		c.unmergeable = err.Error()
		return c
	}
	if c.baseFS, err = repo.Tree(c.base); err != nil {
		c.err = err
		return c
	}
	if c.mergeFS, err = repo.Tree(c.merge); err != nil {
		c.err = err
	}
	return c
}

// resolveHead finds the head's commit: the one a webhook names, if the
// clone holds it (fetched by the pull request's ref if need be); else
// what the head ref names.
func resolveHead(ctx context.Context, repo *source.Repo, ch Change) (plumbing.Hash, error) {
	has := func(sha string) bool {
		_, err := repo.Resolve(sha)
		return err == nil
	}
	fetched := plumbing.ZeroHash
	var err error
	switch {
	case plumbing.IsHash(ch.Head) && len(ch.Head) == 40:
		if !has(ch.Head) {
			return plumbing.ZeroHash, errors.New("no such commit in the repository's branches and tags: name the pull request's ref (refs/pull/N/head, refs/merge-requests/N/head)")
		}
		fetched = plumbing.NewHash(ch.Head)
	case strings.HasPrefix(ch.Head, "refs/") && !strings.HasPrefix(ch.Head, "refs/heads/") && !strings.HasPrefix(ch.Head, "refs/tags/"):
		if fetched, err = repo.FetchRef(ctx, ch.Head); err != nil {
			return plumbing.ZeroHash, err
		}
	default:
		c, err := repo.Resolve(strings.TrimPrefix(ch.Head, "refs/heads/"))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		fetched = c.Hash
	}
	if ch.HeadCommit == "" || fetched.String() == ch.HeadCommit {
		return fetched, nil
	}
	if has(ch.HeadCommit) {
		return plumbing.NewHash(ch.HeadCommit), nil
	}
	return plumbing.ZeroHash, fmt.Errorf("is at %s, not at %s as the forge said: pushed again meanwhile (the next event previews it)", fetched.String()[:12], ch.HeadCommit[:12])
}

// changedUnder reports whether the change alters anything under dir.
func changedUnder(c *clone, dir string) bool {
	th := func(fs source.FS) string {
		t, ok := fs.(interface{ TreeHash(string) (string, error) })
		if !ok {
			return ""
		}
		h, err := t.TreeHash(dir)
		if err != nil {
			return "absent"
		}
		return h
	}
	a, b := th(c.baseFS), th(c.mergeFS)
	return a == "" || a != b
}
