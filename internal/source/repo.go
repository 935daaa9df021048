package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/egress"
)

// Repo is an open repository. Its methods are safe for concurrent use:
// go-git's object storage is not, so every object access is serialised,
// and decoded trees are cached because renders read the same ones again
// and again.
type Repo struct {
	loc     Location
	root    string // the directory of the repository (its worktree, if any)
	prefix  string // the location's folder inside the repository, "." for its root
	remote  bool
	creds   *credentials
	egress  *egress.Policy
	onFetch func()
	observe func(op string)
	guard   func(ctx context.Context) error
	stall   time.Duration
	// lock is the clone's lock file: other processes sharing the cache
	// fetch into and push from the same clone, so each fetch and push
	// holds it.
	lock string
	// fetched is when the clone last asked the remote for its refs.
	fetched time.Time
	// fail is the backoff of the remote's failures, shared with the
	// Cache's later Opens of the same clone.
	fail *backoff.Failures
	// damaged is why a clone of the cache cannot be trusted (an object a
	// tree names is missing or unreadable): the Cache clones it again.
	damaged atomic.Pointer[error]
	// opened is when the Cache last handed the clone out (Unix
	// nanoseconds): one left alone past idleClose has its pack files
	// closed.
	opened atomic.Int64
	// holding is set while the clone counts in its Cache's holding.
	holding atomic.Bool
	// objects is the Cache's object cache, for a clone opened again.
	objects cache.Object

	mu    sync.Mutex
	git   *git.Repository
	head  string // the remote's default branch, for remotes
	empty bool
	trees map[plumbing.Hash]*object.Tree
	// commits caches commit → tree, and resolved refs: a run reads the
	// same few commits for every sync.
	commits  map[plumbing.Hash]plumbing.Hash
	resolved map[string]plumbing.Hash
	// refs are a remote's branches and tags as this process last fetched
	// them. Another process sharing the clone may move the clone's refs
	// to objects in packs this process has not indexed; resolving
	// against its own fetch's refs, a run reads only objects it has.
	refs map[plumbing.ReferenceName]plumbing.Hash
	// indexed are the pack indexes of the clone when it was last
	// reindexed.
	indexed []string
}

func newRepo(loc Location, g *git.Repository, root, prefix string) *Repo {
	return &Repo{loc: loc, git: g, root: root, prefix: prefix, fail: &backoff.Failures{}, trees: map[plumbing.Hash]*object.Tree{},
		commits: map[plumbing.Hash]plumbing.Hash{}, resolved: map[string]plumbing.Hash{}, refs: map[plumbing.ReferenceName]plumbing.Hash{}}
}

// Location is where the repository lives.
func (r *Repo) Location() Location { return r.loc }

// Root is the directory of a local repository's worktree (or of a clone).
func (r *Repo) Root() string { return r.root }

// Prefix is the folder of the opened location inside the repository.
func (r *Repo) Prefix() string { return r.prefix }

// Empty reports whether the repository has no commits at all.
func (r *Repo) Empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.remote {
		return r.empty
	}
	refs, err := r.git.References()
	if err != nil {
		return true
	}
	defer refs.Close()
	empty := true
	refs.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference {
			empty = false
			return io.EOF
		}
		return nil
	})
	return empty
}

// fetch brings a remote's clone up to date with every branch and tag of
// the remote. It asks for objects only when some ref moved.
func (r *Repo) fetch(ctx context.Context) error {
	ctx, err := r.connect(ctx)
	if err != nil {
		return err
	}
	method, url, err := r.creds.method(r.loc.URL)
	if err != nil {
		return err
	}
	r.compact()
	remote, err := r.git.Remote("origin")
	if err != nil {
		return err
	}
	r.note("ls-remote")
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: method})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		r.empty = true
		r.refs, r.fetched = map[plumbing.ReferenceName]plumbing.Hash{}, time.Now()
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing refs of %s: %w%s", r.loc, redactErr(err), authHint(err, method))
	}
	r.empty = len(refs) == 0
	want := map[plumbing.ReferenceName]plumbing.Hash{}
	for _, ref := range refs {
		switch {
		case ref.Name() == plumbing.HEAD && ref.Type() == plumbing.SymbolicReference:
			r.head = ref.Target().Short()
		case ref.Type() == plumbing.HashReference && (ref.Name().IsBranch() || ref.Name().IsTag()):
			want[ref.Name()] = ref.Hash()
		}
	}
	if r.head == "" {
		r.head = guessHead(want)
	}
	clear(r.resolved)
	at := time.Now()
	// What others sharing the clone fetched or pushed is in packs this
	// process has not indexed yet.
	r.reindex()
	if len(r.trees) > maxTrees {
		clear(r.trees) // a long-lived clone reads ever new trees
	}
	if !r.refsDiffer(want) {
		r.refs, r.fetched = want, at
		return nil
	}
	if r.onFetch != nil {
		r.onFetch()
	}
	r.note("fetch")
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RemoteURL: url,
		RefSpecs:  []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"},
		Auth:      method,
		Tags:      git.NoTags,
		Prune:     true,
		Force:     true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		// The refs and the fetch time stay as they were: the next Open
		// tries again rather than trust refs whose objects never came.
		// The pack that came halfway is no object of the clone's.
		removeTmpPacks(r.root)
		hint := ""
		if errors.Is(err, syscall.ENOSPC) {
			hint = " (the clone cache's disk is full: the fetch is tried again, and goes on once there is space)"
		}
		return fmt.Errorf("fetching %s: %w%s", r.loc, redactErr(err), hint)
	}
	r.refs, r.fetched = want, at
	return nil
}

// authHint says what to do about a server refusing a request for its
// credentials.
func authHint(err error, method transport.AuthMethod) string {
	if !errors.Is(err, transport.ErrAuthenticationRequired) && !errors.Is(err, transport.ErrAuthorizationFailed) {
		return ""
	}
	if method == nil {
		return " (no credentials were given: name a Secret holding them)"
	}
	return " (the server refused the credentials given: revoked or expired? rotate them)"
}

// removeTmpPacks removes what fetches that failed halfway left of their
// packs (a connection reset, a process killed), under the clone's lock:
// they are never read, only take space.
func removeTmpPacks(root string) {
	tmps, _ := filepath.Glob(filepath.Join(root, "objects", "pack", "tmp_*"))
	for _, p := range tmps {
		os.Remove(p)
	}
}

// refsDiffer reports whether the clone's branches and tags differ from want.
func (r *Repo) refsDiffer(want map[plumbing.ReferenceName]plumbing.Hash) bool {
	iter, err := r.git.References()
	if err != nil {
		return true
	}
	defer iter.Close()
	have := 0
	differ := false
	iter.ForEach(func(ref *plumbing.Reference) error {
		if !ref.Name().IsBranch() && !ref.Name().IsTag() {
			return nil
		}
		have++
		if want[ref.Name()] != ref.Hash() {
			differ = true
			return io.EOF
		}
		return nil
	})
	return differ || have != len(want)
}

// guessHead picks a default branch when the server does not say which.
func guessHead(refs map[plumbing.ReferenceName]plumbing.Hash) string {
	for _, b := range []string{"main", "master"} {
		if _, ok := refs[plumbing.NewBranchReferenceName(b)]; ok {
			return b
		}
	}
	return ""
}

// Refresh fetches a remote again (after a rejected push); a local
// repository is always current.
func (r *Repo) Refresh(ctx context.Context) error {
	if !r.remote {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	unlock, err := lockFile(r.lock)
	if err != nil {
		return err
	}
	defer unlock()
	return r.fetch(ctx)
}

func (r *Repo) note(op string) {
	if r.observe != nil {
		r.observe(op)
	}
}

// maxTrees bounds the decoded trees a Repo keeps.
const maxTrees = 50_000

// maxCommits bounds the commits a Repo remembers the tree of.
const maxCommits = 50_000

// refreshIfOlder fetches again when the last fetch is older than d (0:
// any age) or than notBefore.
func (r *Repo) refreshIfOlder(ctx context.Context, d time.Duration, notBefore time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if (d <= 0 || time.Since(r.fetched) < d) && !r.fetched.Before(notBefore) {
		return nil
	}
	creds := r.credsKey()
	if err := r.fail.Shared(time.Now(), notBefore, creds); err != nil {
		return err
	}
	unlock, err := lockFile(r.lock)
	if err != nil {
		return err
	}
	defer unlock()
	fctx, ra := backoff.WithRetryAfter(ctx)
	return r.fail.Record(ctx, r.fetch(fctx), ra.Get(), d, creds)
}

// credsKey identifies the credentials the clone's requests use now.
func (r *Repo) credsKey() [32]byte {
	if r.creds == nil {
		return credsKey(Auth{})
	}
	r.creds.mu.Lock()
	defer r.creds.mu.Unlock()
	return credsKey(r.creds.auth)
}

// reindex makes the object storage list the clone's packs again.
// Reindexing a clone costs reading every pack index it holds again, so
// it is done only when the clone's packs are not those last indexed.
func (r *Repo) reindex() {
	s, ok := r.git.Storer.(interface {
		Reindex()
		Filesystem() billy.Filesystem
	})
	if !ok {
		return
	}
	var packs []string
	if entries, err := s.Filesystem().ReadDir("objects/pack"); err == nil {
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".idx") {
				packs = append(packs, e.Name())
			}
		}
	} else {
		packs = nil // unknown: reindex
	}
	slices.Sort(packs)
	if packs != nil && slices.Equal(packs, r.indexed) {
		return
	}
	s.Reindex()
	r.indexed = packs
}

// Commit is a resolved commit.
type Commit struct {
	Hash plumbing.Hash
	Tree plumbing.Hash
}

// Resolve finds the commit a ref names: "" for the default branch (the
// remote's HEAD, or a local repository's checked-out HEAD), a branch, a
// tag, or a full commit SHA.
func (r *Repo) Resolve(ref string) (Commit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.resolved[ref]
	if !ok {
		var err error
		if h, err = r.resolve(ref); err != nil {
			return Commit{}, err
		}
		r.resolved[ref] = h
	}
	tree, err := r.commitTree(h)
	if err != nil {
		return Commit{}, fmt.Errorf("%s: commit %s: %w", r.loc, h, err)
	}
	return Commit{Hash: h, Tree: tree}, nil
}

// commitTree returns a commit's tree; the caller holds r.mu.
func (r *Repo) commitTree(h plumbing.Hash) (plumbing.Hash, error) {
	if t, ok := r.commits[h]; ok {
		return t, nil
	}
	c, err := read(r, func() (*object.Commit, error) { return r.git.CommitObject(h) })
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(r.commits) >= maxCommits {
		clear(r.commits)
	}
	r.commits[h] = c.TreeHash
	return c.TreeHash, nil
}

func (r *Repo) resolve(ref string) (plumbing.Hash, error) {
	if ref == "HEAD" {
		ref = ""
	}
	if ref == "" {
		if r.remote {
			if r.head == "" {
				return plumbing.ZeroHash, fmt.Errorf("%s has no default branch: set a ref", r.loc)
			}
			ref = r.head
		} else {
			h, err := r.git.ResolveRevision(plumbing.Revision("HEAD"))
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("%s: HEAD: %w", r.loc, err)
			}
			return *h, nil
		}
	}
	if len(ref) == 40 && plumbing.IsHash(ref) {
		h := plumbing.NewHash(ref)
		if _, err := r.git.CommitObject(h); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: commit %s not found on any branch or tag", r.loc, ref)
		}
		return h, nil
	}
	names := []string{ref, "refs/heads/" + ref, "refs/tags/" + ref}
	if !r.remote {
		names = append(names, "refs/remotes/origin/"+ref)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "refs/") {
			continue
		}
		var h plumbing.Hash
		if r.remote {
			var ok bool
			if h, ok = r.refs[plumbing.ReferenceName(n)]; !ok {
				continue
			}
		} else {
			ref, err := r.git.Reference(plumbing.ReferenceName(n), true)
			if err != nil {
				continue
			}
			h = ref.Hash()
		}
		if tag, err := r.git.TagObject(h); err == nil { // annotated tag: peel
			c, err := tag.Commit()
			if err != nil {
				return plumbing.ZeroHash, fmt.Errorf("%s: tag %s: %w", r.loc, n, err)
			}
			h = c.Hash
		}
		return h, nil
	}
	return plumbing.ZeroHash, fmt.Errorf("%s: no branch or tag %q", r.loc, ref)
}

// Branch returns the tip of a branch, or the zero hash when it is absent.
func (r *Repo) Branch(name string) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.remote {
		return r.refs[plumbing.NewBranchReferenceName(name)], nil
	}
	ref, err := r.git.Reference(plumbing.NewBranchReferenceName(name), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ref.Hash(), nil
}

// DefaultBranch is the branch a ref of "" resolves to ("" when unknown).
func (r *Repo) DefaultBranch() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.remote {
		return r.head
	}
	ref, err := r.git.Reference(plumbing.HEAD, false)
	if err != nil || ref.Type() != plumbing.SymbolicReference {
		return ""
	}
	return ref.Target().Short()
}

// CommitTree returns the tree hash of a commit.
func (r *Repo) CommitTree(h plumbing.Hash) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitTree(h)
}

// tree returns a decoded tree; the caller holds r.mu.
func (r *Repo) tree(h plumbing.Hash) (*object.Tree, error) {
	if t, ok := r.trees[h]; ok {
		return t, nil
	}
	t, err := read(r, func() (*object.Tree, error) { return r.git.TreeObject(h) })
	if err != nil {
		return nil, err
	}
	r.trees[h] = t
	return t, nil
}

// ReadTree returns the entries of a tree.
func (r *Repo) ReadTree(h plumbing.Hash) ([]object.TreeEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.tree(h)
	if err != nil {
		return nil, err
	}
	return t.Entries, nil
}

// ReadBlob returns the content of a blob.
func (r *Repo) ReadBlob(h plumbing.Hash) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readBlob(h)
}

func (r *Repo) readBlob(h plumbing.Hash) ([]byte, error) {
	b, err := read(r, func() (*object.Blob, error) { return r.git.BlobObject(h) })
	if err != nil {
		return nil, err
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	buf := bytes.NewBuffer(make([]byte, 0, b.Size))
	_, err = io.Copy(buf, rd)
	return buf.Bytes(), err
}

// WriteBlob stores a file's content and returns its hash.
func (r *Repo) WriteBlob(data []byte) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeBlob(data)
}

// writeBlob is WriteBlob for a caller holding r.mu.
func (r *Repo) writeBlob(data []byte) (plumbing.Hash, error) {
	obj := r.git.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.git.Storer.SetEncodedObject(obj)
}

// WriteTree stores a tree of the given entries, in git's order whatever
// their order here, and returns its hash.
func (r *Repo) WriteTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeTree(entries)
}

// writeTree is WriteTree for a caller holding r.mu.
func (r *Repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sorted := append([]object.TreeEntry(nil), entries...)
	sort.Sort(object.TreeEntrySorter(sorted))
	obj := r.git.Storer.NewEncodedObject()
	if err := (&object.Tree{Entries: sorted}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.git.Storer.SetEncodedObject(obj)
}

// WriteCommit stores a commit and returns its hash.
func (r *Repo) WriteCommit(c *object.Commit) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeCommit(c)
}

// writeCommit is WriteCommit for a caller holding r.mu.
func (r *Repo) writeCommit(c *object.Commit) (plumbing.Hash, error) {
	obj := r.git.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.git.Storer.SetEncodedObject(obj)
}

// CommitMessage returns the message of a commit.
func (r *Repo) CommitMessage(h plumbing.Hash) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.git.CommitObject(h)
	if err != nil {
		return "", err
	}
	return c.Message, nil
}

// ErrStale is returned by UpdateBranch when the branch is no longer at the
// expected commit: someone else pushed meanwhile.
var ErrStale = errors.New("branch moved meanwhile")

// UpdateBranchOptions tune UpdateBranch.
type UpdateBranchOptions struct {
	// Force replaces the branch even when new does not descend from its
	// tip (for branches Sluice owns, such as review branches).
	Force bool
}

// UpdateBranch moves a branch from old (the zero hash: absent) to new:
// a push for a remote, a compare-and-swap of the ref for a local
// repository. It never forces unless asked: when the branch is no longer
// at old it returns ErrStale, with the clone refreshed for a retry.
func (r *Repo) UpdateBranch(ctx context.Context, name string, newHash, old plumbing.Hash, o UpdateBranchOptions) error {
	refName := plumbing.NewBranchReferenceName(name)
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.resolved)
	if err := r.mayPush(ctx, name); err != nil {
		return err
	}
	if !r.remote {
		return r.updateLocal(refName, newHash, old, o)
	}
	ctx, err := r.connect(ctx)
	if err != nil {
		return err
	}
	method, url, err := r.creds.method(r.loc.URL)
	if err != nil {
		return err
	}
	unlock, err := lockFile(r.lock)
	if err != nil {
		return err
	}
	defer unlock()
	r.note("push")
	said := &serverSaid{}
	err = r.pushCommits(ctx, url, method, refName, newHash, old, o.Force, said)
	if errors.Is(err, errNotSimple) {
		err = r.pushAll(ctx, url, method, name, refName, newHash, o.Force, said)
	}
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		// Mirror the new tip locally, as the next fetch would.
		r.refs[refName] = newHash
		if err := r.git.Storer.SetReference(plumbing.NewHashReference(refName, newHash)); err != nil {
			return err
		}
		// Each write left a pack (Batch.Flush): the clone rolls them up
		// now, while it writes, not at its next fetch, which may be an
		// idle interval's (or, for a destination only written to, hours
		// of packs later, its reads going through hundreds of them).
		r.compact()
		return nil
	}
	pushErr := redactErr(err)
	if words := said.String(); words != "" {
		pushErr = fmt.Errorf("%w; the server said: %q", pushErr, words)
	}
	if ferr := r.fetch(ctx); ferr != nil {
		return fmt.Errorf("pushing %s to %s: %w (and refreshing: %v)", name, r.loc, pushErr, ferr)
	}
	tip, _ := r.git.Reference(refName, true)
	if tip != nil && tip.Hash() == newHash && newHash != old {
		// It landed; its answer was lost (a connection reset after the
		// server took it): done, not pushed again.
		return nil
	}
	if (tip == nil && !old.IsZero()) || (tip != nil && tip.Hash() != old) {
		return fmt.Errorf("pushing %s to %s: %w", name, r.loc, ErrStale)
	}
	if strings.Contains(pushErr.Error(), "hook declined") {
		// The forge's own checks refused it; say what they usually are.
		return fmt.Errorf("pushing %s to %s: %w: the forge refused it (a protected branch may require signed commits: sign with --signing-key or spec.destination.signing; or review: use destination.mode pullRequest)", name, r.loc, pushErr)
	}
	return fmt.Errorf("pushing %s to %s: %w", name, r.loc, pushErr)
}

// mayPush asks the cache's push guard whether a branch may be pushed now.
func (r *Repo) mayPush(ctx context.Context, branch string) error {
	if r.guard == nil {
		return nil
	}
	if err := r.guard(ctx); err != nil {
		return fmt.Errorf("not pushing %s to %s: %w", branch, r.loc, err)
	}
	return nil
}

// pushAll pushes through go-git's push, which sends what the remote's
// advertised history lacks (pushCommits sends a short run of commits on
// the remote's tip more cheaply).
func (r *Repo) pushAll(ctx context.Context, url string, method transport.AuthMethod, name string, refName plumbing.ReferenceName, newHash plumbing.Hash, force bool, said *serverSaid) error {
	// The push walks the clone's refs, which others sharing it may have
	// moved to objects in packs of theirs.
	r.reindex()
	local := plumbing.ReferenceName("refs/sluice/push/" + name)
	if err := r.git.Storer.SetReference(plumbing.NewHashReference(local, newHash)); err != nil {
		return err
	}
	defer r.git.Storer.RemoveReference(local)
	spec := config.RefSpec(local.String() + ":" + refName.String())
	if force {
		spec = "+" + spec
	}
	remote, err := r.git.Remote("origin")
	if err != nil {
		return err
	}
	return remote.PushContext(ctx, &git.PushOptions{RemoteURL: url, RefSpecs: []config.RefSpec{spec}, Auth: method, Progress: said})
}

func (r *Repo) updateLocal(refName plumbing.ReferenceName, newHash, old plumbing.Hash, o UpdateBranchOptions) error {
	if wt, err := r.git.Worktree(); err == nil {
		if head, err := r.git.Reference(plumbing.HEAD, false); err == nil && head.Target() == refName {
			return fmt.Errorf("branch %s is checked out in %s: write to a bare repository or to another branch", refName.Short(), wt.Filesystem.Root())
		}
	}
	cur, err := r.git.Reference(refName, true)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		if !old.IsZero() && !o.Force {
			return fmt.Errorf("updating %s in %s: %w", refName.Short(), r.loc, ErrStale)
		}
		cur = nil
	case err != nil:
		return err
	case cur.Hash() != old && !o.Force:
		return fmt.Errorf("updating %s in %s: %w", refName.Short(), r.loc, ErrStale)
	}
	if err := r.git.Storer.CheckAndSetReference(plumbing.NewHashReference(refName, newHash), cur); err != nil {
		return fmt.Errorf("updating %s in %s: %w: %v", refName.Short(), r.loc, ErrStale, err)
	}
	return nil
}

// redactErr removes credentials from an error's text.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := Redact(msg); red != msg {
		return errors.New(red)
	}
	return err
}

// fileMode maps a go-git mode to whether an entry is a directory.
func isDir(m filemode.FileMode) bool { return m == filemode.Dir }

// Signed is a commit or an annotated tag as its signature covers it.
type Signed struct {
	// What names it: "commit 1a2b3c4", "tag v1.2.0".
	What string
	// Payload is the object as git encodes it without its signature.
	Payload []byte
	// Signature is its gpgsig (a commit's) or trailing signature (a
	// tag's); empty when unsigned.
	Signature string
}

// SignedCommit returns commit h as its signature covers it.
func (r *Repo) SignedCommit(h plumbing.Hash) (Signed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.git.CommitObject(h)
	if err != nil {
		return Signed{}, fmt.Errorf("commit %s: %w", h, err)
	}
	obj := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(obj); err != nil {
		return Signed{}, err
	}
	payload, err := readObject(obj)
	return Signed{What: "commit " + h.String()[:7], Payload: payload, Signature: c.PGPSignature}, err
}

// SignedTag returns the annotated tag name as its signature covers it;
// a lightweight tag, which cannot be signed, is an error.
func (r *Repo) SignedTag(name string) (Signed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name = strings.TrimPrefix(name, "refs/tags/")
	ref, err := r.git.Tag(name)
	if err != nil {
		return Signed{}, fmt.Errorf("tag %s: %w", name, err)
	}
	t, err := r.git.TagObject(ref.Hash())
	if err != nil {
		return Signed{}, fmt.Errorf("tag %s is a lightweight tag, which cannot be signed: make it an annotated, signed tag (git tag -s)", name)
	}
	obj := &plumbing.MemoryObject{}
	if err := t.EncodeWithoutSignature(obj); err != nil {
		return Signed{}, err
	}
	payload, err := readObject(obj)
	return Signed{What: "tag " + name, Payload: payload, Signature: t.PGPSignature}, err
}

func readObject(obj *plumbing.MemoryObject) ([]byte, error) {
	rd, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

// read reads an object of the clone, once more if its packs moved since it
// last listed them, and marks the clone damaged if it still cannot. The
// caller holds r.mu.
func read[T any](r *Repo, get func() (T, error)) (T, error) {
	v, err := get()
	if err != nil && r.packsMoved() {
		v, err = get()
	}
	r.noteRead(err)
	return v, err
}

// packsMoved lists the clone's packs again after a read failed, and
// reports whether they changed since it last did: another process sharing
// the clone may have rolled up the packs this one had indexed, and the
// object is then in a new pack (git too looks at the pack folder again
// before it calls an object missing). The caller holds r.mu.
func (r *Repo) packsMoved() bool {
	if !r.remote {
		return false
	}
	before := r.indexed
	r.reindex()
	return before == nil || !slices.Equal(before, r.indexed)
}

// noteRead marks a clone damaged when a tree or blob it must hold cannot
// be read: a missing object or a broken pack, not the remote's doing.
func (r *Repo) noteRead(err error) {
	if !r.remote || err == nil {
		return
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, packfile.ErrZLib) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "packfile") || strings.Contains(err.Error(), "zlib") {
		r.damaged.CompareAndSwap(nil, &err)
	}
}

// health says why a clone of the cache cannot be used as it is: marked
// damaged by a read, or its directory (or what git needs of it) gone.
func (r *Repo) health() error {
	if !r.remote {
		return nil
	}
	if p := r.damaged.Load(); p != nil {
		return *p
	}
	for _, name := range []string{"HEAD", "config", "objects"} {
		if _, err := os.Stat(filepath.Join(r.root, name)); err != nil {
			return fmt.Errorf("the clone's %s is gone", name)
		}
	}
	return nil
}
