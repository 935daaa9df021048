package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ConflictError says two commits cannot be merged without a person: both
// sides changed the same lines of these files (or one changed what the
// other removed).
type ConflictError struct {
	Paths []string
}

func (e *ConflictError) Error() string {
	const most = 5
	p := e.Paths
	more := ""
	if len(p) > most {
		p, more = p[:most], fmt.Sprintf(" and %d more", len(e.Paths)-most)
	}
	return fmt.Sprintf("the changes conflict with the base in %s%s: rebase the pull request or merge its base into it", strings.Join(p, ", "), more)
}

// maxMergeFile bounds the files merged line by line: a larger file
// changed on both sides is a conflict.
const maxMergeFile = 4 << 20

// Merge merges theirs onto ours as `git merge` would without a person
// (the recursive strategy's result where there is one merge base; files
// both sides changed merged line by line), stores the result in the
// clone, and returns the merge commit (theirs itself when ours is
// already in it, ours when theirs is). The commit is the clone's only:
// it is never pushed.
func (r *Repo) Merge(ours, theirs plumbing.Hash) (Commit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	co, err := r.git.CommitObject(ours)
	if err != nil {
		return Commit{}, fmt.Errorf("%s: commit %s: %w", r.loc, ours, err)
	}
	ct, err := r.git.CommitObject(theirs)
	if err != nil {
		return Commit{}, fmt.Errorf("%s: commit %s: %w", r.loc, theirs, err)
	}
	bases, err := co.MergeBase(ct)
	if err != nil {
		return Commit{}, fmt.Errorf("%s: the merge base of %s and %s: %w", r.loc, ours, theirs, err)
	}
	if len(bases) == 0 {
		return Commit{}, fmt.Errorf("%s: %s and %s share no history: nothing to merge onto", r.loc, short(ours), short(theirs))
	}
	// Of several merge bases (criss-cross merges), the first: git's
	// recursive strategy would merge them first, which differs only
	// where they disagree.
	base := bases[0]
	switch base.Hash {
	case theirs:
		return Commit{Hash: ours, Tree: co.TreeHash}, nil
	case ours:
		return Commit{Hash: theirs, Tree: ct.TreeHash}, nil
	}
	m := merger{r: r}
	tree, err := m.trees(base.TreeHash, co.TreeHash, ct.TreeHash, "")
	if err != nil {
		return Commit{}, err
	}
	if len(m.conflicts) > 0 {
		return Commit{}, &ConflictError{Paths: m.conflicts}
	}
	sig := object.Signature{Name: "Sluice", Email: "sluice@sluice.dev", When: time.Unix(max(co.Committer.When.Unix(), ct.Committer.When.Unix()), 0).UTC()}
	c := &object.Commit{Author: sig, Committer: sig, TreeHash: tree, ParentHashes: []plumbing.Hash{ours, theirs},
		Message: fmt.Sprintf("Merge %s into %s\n", theirs, ours)}
	h, err := r.writeCommit(c)
	if err != nil {
		return Commit{}, fmt.Errorf("%s: storing the merge: %w", r.loc, err)
	}
	return Commit{Hash: h, Tree: tree}, nil
}

// merger merges trees within one Merge; its caller holds r.mu.
type merger struct {
	r         *Repo
	conflicts []string
}

// entries are a tree's entries by name (none for the zero hash: absent).
func (m *merger) entries(h plumbing.Hash) (map[string]object.TreeEntry, error) {
	out := map[string]object.TreeEntry{}
	if h.IsZero() {
		return out, nil
	}
	t, err := m.r.tree(h)
	if err != nil {
		return nil, fmt.Errorf("%s: tree %s: %w", m.r.loc, h, err)
	}
	for _, e := range t.Entries {
		out[e.Name] = e
	}
	return out, nil
}

// trees merges three trees (any may be absent: the zero hash) and
// stores the result; the zero hash when it is empty.
func (m *merger) trees(base, ours, theirs plumbing.Hash, dir string) (plumbing.Hash, error) {
	eb, err := m.entries(base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	eo, err := m.entries(ours)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	et, err := m.entries(theirs)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	names := map[string]bool{}
	for _, e := range []map[string]object.TreeEntry{eb, eo, et} {
		for n := range e {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []object.TreeEntry
	for _, n := range sorted {
		b, hb := eb[n]
		o, ho := eo[n]
		t, ht := et[n]
		p := path.Join(dir, n)
		same := func(x object.TreeEntry, hx bool, y object.TreeEntry, hy bool) bool {
			return hx == hy && (!hx || x.Hash == y.Hash && x.Mode == y.Mode)
		}
		switch {
		case same(o, ho, t, ht):
			if ho {
				out = append(out, o)
			}
			continue
		case same(b, hb, o, ho):
			if ht {
				out = append(out, t)
			}
			continue
		case same(b, hb, t, ht):
			if ho {
				out = append(out, o)
			}
			continue
		}
		// Both sides changed n, differently.
		dirOr := func(e object.TreeEntry, has bool) (plumbing.Hash, bool) {
			if !has {
				return plumbing.ZeroHash, true
			}
			return e.Hash, e.Mode == filemode.Dir
		}
		bh, bd := dirOr(b, hb)
		oh, od := dirOr(o, ho)
		th, td := dirOr(t, ht)
		if bd && od && td && (ho || ht) && (!ho || o.Mode == filemode.Dir) && (!ht || t.Mode == filemode.Dir) {
			h, err := m.trees(bh, oh, th, p)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if !h.IsZero() {
				out = append(out, object.TreeEntry{Name: n, Mode: filemode.Dir, Hash: h})
			}
			continue
		}
		regular := func(e object.TreeEntry) bool { return e.Mode == filemode.Regular || e.Mode == filemode.Executable }
		mode, ok := o.Mode, true
		switch {
		case !ho || !ht || !regular(o) || !regular(t) || hb && !regular(b):
			ok = false // removed on one side, or not two files
		case o.Mode == t.Mode:
		case hb && o.Mode == b.Mode:
			mode = t.Mode
		case hb && t.Mode == b.Mode:
		default:
			ok = false // made executable on one side only of an added file
		}
		if !ok {
			m.conflicts = append(m.conflicts, p)
			continue
		}
		h, ok, err := m.blobs(b, hb, o, t)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %s: %w", m.r.loc, p, err)
		}
		if !ok {
			m.conflicts = append(m.conflicts, p)
			continue
		}
		out = append(out, object.TreeEntry{Name: n, Mode: mode, Hash: h})
	}
	if len(out) == 0 {
		return plumbing.ZeroHash, nil
	}
	return m.r.writeTree(out)
}

// blobs merges a file both sides changed, line by line; false when their
// changes overlap, or either is binary or too large to merge.
func (m *merger) blobs(b object.TreeEntry, hb bool, o, t object.TreeEntry) (plumbing.Hash, bool, error) {
	read := func(e object.TreeEntry) ([]byte, bool, error) {
		if m.r.sizeLocked(e) > maxMergeFile {
			return nil, false, nil
		}
		data, err := m.r.readBlob(e.Hash)
		if err != nil {
			return nil, false, err
		}
		return data, !bytes.Contains(data, []byte{0}), nil
	}
	var base []byte
	if hb {
		var ok bool
		var err error
		if base, ok, err = read(b); err != nil || !ok {
			return plumbing.ZeroHash, false, err
		}
	}
	ours, ok, err := read(o)
	if err != nil || !ok {
		return plumbing.ZeroHash, false, err
	}
	theirs, ok, err := read(t)
	if err != nil || !ok {
		return plumbing.ZeroHash, false, err
	}
	merged, ok := Merge3(base, ours, theirs)
	if !ok {
		return plumbing.ZeroHash, false, nil
	}
	h, err := m.r.writeBlob(merged)
	return h, err == nil, err
}

// ErrNoSuchRef says the remote has no such ref.
var ErrNoSuchRef = errors.New("no such ref")

// FetchRef fetches one ref of the remote that a regular fetch leaves out
// (a pull request's head: refs/pull/N/head on GitHub and Gitea,
// refs/merge-requests/N/head on GitLab) and returns its commit. The ref
// is kept in the clone under refs/sluice/, never pushed.
func (r *Repo) FetchRef(ctx context.Context, name string) (plumbing.Hash, error) {
	if !strings.HasPrefix(name, "refs/") || strings.ContainsAny(name, " ~^:?*[\\") || strings.Contains(name, "..") {
		return plumbing.ZeroHash, fmt.Errorf("%q: not a full ref name", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	local := plumbing.ReferenceName("refs/sluice/fetched/" + strings.TrimPrefix(name, "refs/"))
	if !r.remote {
		ref, err := r.git.Reference(plumbing.ReferenceName(name), true)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%s: %s: %w", r.loc, name, ErrNoSuchRef)
		}
		return ref.Hash(), nil
	}
	ctx, err := r.connect(ctx)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	method, url, err := r.creds.method(r.loc.URL)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	unlock, err := lockFile(r.lock)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer unlock()
	remote, err := r.git.Remote("origin")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r.note("fetch")
	err = remote.FetchContext(ctx, &git.FetchOptions{
		RemoteURL: url,
		RefSpecs:  []config.RefSpec{config.RefSpec("+" + name + ":" + string(local))},
		Auth:      method,
		Tags:      git.NoTags,
		Force:     true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		removeTmpPacks(r.root)
		if strings.Contains(err.Error(), "couldn't find remote ref") {
			return plumbing.ZeroHash, fmt.Errorf("%s: %s: %w", r.loc, name, ErrNoSuchRef)
		}
		return plumbing.ZeroHash, fmt.Errorf("fetching %s of %s: %w%s", name, r.loc, redactErr(err), authHint(err, method))
	}
	r.reindex()
	ref, err := r.git.Reference(local, true)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s: %s: %w", r.loc, name, ErrNoSuchRef)
	}
	return ref.Hash(), nil
}
