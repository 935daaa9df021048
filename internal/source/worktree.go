package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Head is what a local working tree is on.
type Head struct {
	// Root is the working tree's top directory.
	Root string
	// GitDir is its git directory (a linked worktree's own, where git
	// takes its index lock).
	GitDir string
	// Branch is the checked-out branch ("" when detached).
	Branch string
	// Commit is HEAD's commit ("" in a repository without commits).
	Commit string
	// Remote is the URL of the remote the branch tracks, else origin's.
	Remote string
}

// LocalHead reads the git working tree holding dir. It returns an error
// when dir is not in one.
func LocalHead(dir string) (Head, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return Head{}, err
	}
	var h Head
	if wt, err := r.Worktree(); err == nil {
		h.Root = wt.Filesystem.Root()
	}
	if st, ok := r.Storer.(interface{ Filesystem() billy.Filesystem }); ok {
		h.GitDir = st.Filesystem().Root()
	}
	ref, err := r.Head()
	switch {
	case err == nil:
		h.Commit = ref.Hash().String()
		if ref.Name().IsBranch() {
			h.Branch = ref.Name().Short()
		}
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		if sym, err := r.Storer.Reference(plumbing.HEAD); err == nil && sym.Target().IsBranch() {
			h.Branch = sym.Target().Short()
		}
	default:
		return h, err
	}
	remote := "origin"
	if cfg, err := r.Config(); err == nil {
		if b, ok := cfg.Branches[h.Branch]; ok && b.Remote != "" {
			remote = b.Remote
		}
		if rc, ok := cfg.Remotes[remote]; ok && len(rc.URLs) > 0 {
			h.Remote = Redact(rc.URLs[0])
		}
	}
	return h, nil
}

// Worktree is a checkout on disk of a branch (or tag) of a repository,
// for rendering someone's branch as if it were a local working tree.
type Worktree struct {
	// Dir is the checkout.
	Dir  string
	loc  Location
	ref  string
	auth Auth
	repo *git.Repository
	// Commit is the commit checked out.
	Commit string
}

// CloneWorktree checks out ref of the repository at rawURL into dir (a new
// or empty directory), shallowly.
func CloneWorktree(ctx context.Context, rawURL, ref, dir string, auth Auth) (*Worktree, error) {
	loc, err := ParseLocation(rawURL, "")
	if err != nil {
		return nil, err
	}
	if ref == "" {
		ref = loc.Ref
	}
	w := &Worktree{Dir: dir, loc: loc, ref: ref, auth: auth}
	url := loc.URL
	if loc.IsLocal() {
		url = loc.Path
	}
	am, url2, err := auth.Trusting(rawURL).method(url)
	if err == nil && !loc.IsLocal() {
		url = url2
	} else {
		am = nil
	}
	opts := &git.CloneOptions{URL: url, Auth: am, Depth: 1, SingleBranch: true, Tags: git.NoTags}
	if ref != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(ref)
	}
	r, err := git.PlainCloneContext(ctx, dir, false, opts)
	if err != nil && ref != "" {
		// Not a branch: a tag, perhaps.
		os.RemoveAll(filepath.Join(dir, ".git"))
		opts.ReferenceName = plumbing.NewTagReferenceName(ref)
		r, err = git.PlainCloneContext(ctx, dir, false, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("checking out %s of %s: %w", ref, Redact(rawURL), redactErr(err))
	}
	w.repo = r
	head, err := r.Head()
	if err != nil {
		return nil, err
	}
	w.Commit = head.Hash().String()
	return w, nil
}

// Refresh fetches the ref again and, when it moved, checks out its new
// commit. It reports whether it did.
func (w *Worktree) Refresh(ctx context.Context) (bool, error) {
	remote, err := w.repo.Remote("origin")
	if err != nil {
		return false, err
	}
	err = remote.FetchContext(ctx, &git.FetchOptions{Auth: w.fetchAuth(), Depth: 1, Force: true, Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return false, fmt.Errorf("fetching %s of %s: %w", w.ref, Redact(w.loc.Raw), redactErr(err))
	}
	var target plumbing.Hash
	for _, name := range []plumbing.ReferenceName{plumbing.NewRemoteReferenceName("origin", w.ref), plumbing.NewTagReferenceName(w.ref)} {
		if ref, err := w.repo.Reference(name, true); err == nil {
			target = ref.Hash()
			break
		}
	}
	if target.IsZero() || target.String() == w.Commit {
		return false, nil
	}
	wt, err := w.repo.Worktree()
	if err != nil {
		return false, err
	}
	if err := wt.Reset(&git.ResetOptions{Commit: target, Mode: git.HardReset}); err != nil {
		return false, err
	}
	w.Commit = target.String()
	return true, nil
}

func (w *Worktree) fetchAuth() transport.AuthMethod {
	if w.loc.IsLocal() {
		return nil
	}
	m, _, err := w.auth.Trusting(w.loc.URL).method(w.loc.URL)
	if err != nil {
		return nil
	}
	return m
}
