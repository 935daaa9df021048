package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// A push sends one branch update with the objects the new commits add
// to the tree they were made on, found by comparing trees: go-git's own
// push walks the whole history of every branch the remote advertises to
// find what the remote lacks, a cost that grows with every commit a
// destination repository ever received. The update is a compare-and-swap
// on the server (receive-pack refuses it if the branch is no longer at
// the old commit), and is sent only if the remote advertises the branch
// at the commit the new one was made on, unless forced.

// maxPushCommits bounds the commits one push sends this way; a longer
// run goes through go-git's push.
const maxPushCommits = 16

// errBranchMoved: the remote's branch is not where the new commit was
// made.
var errBranchMoved = errors.New("the branch moved on the remote")

// errNotSimple: the update is not a short run of commits on old; go-git's
// push sends it.
var errNotSimple = errors.New("not a short run of commits on the old tip")

// pushCommits updates refName on the remote at url from old to newHash.
func (r *Repo) pushCommits(ctx context.Context, url string, auth transport.AuthMethod, refName plumbing.ReferenceName, newHash, old plumbing.Hash, force bool, said *serverSaid) error {
	hashes, err := r.newObjects(newHash, old)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// Another clone sharing this one's objects may have written
		// packs this one has not indexed.
		r.reindex()
		hashes, err = r.newObjects(newHash, old)
	}
	if err != nil {
		return err
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return err
	}
	c, err := client.NewClient(ep)
	if err != nil {
		return err
	}
	sess, err := c.NewReceivePackSession(ep, auth)
	if err != nil {
		return err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	refs, err := ar.AllReferences()
	if err != nil {
		return err
	}
	cur := plumbing.ZeroHash
	if ref, err := refs.Reference(refName); err == nil {
		cur = ref.Hash()
	}
	if cur == newHash {
		return git.NoErrAlreadyUpToDate
	}
	if cur != old {
		if force {
			return errNotSimple // the remote may lack what old holds
		}
		return fmt.Errorf("%w (at %s, not %s)", errBranchMoved, short(cur), short(old))
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: refName, Old: cur, New: newHash}}
	// What the server's hooks say comes on the progress side band.
	req.Progress = said
	if ar.Capabilities.Supports(capability.Sideband64k) {
		req.Capabilities.Set(capability.Sideband64k)
	} else if ar.Capabilities.Supports(capability.Sideband) {
		req.Capabilities.Set(capability.Sideband)
	}
	rd, wr := io.Pipe()
	req.Packfile = rd
	encoded := make(chan error, 1)
	go func() {
		e := packfile.NewEncoder(wr, r.serialObjects(), !ar.Capabilities.Supports(capability.OFSDelta))
		if _, err := e.Encode(hashes, 10); err != nil {
			encoded <- wr.CloseWithError(err)
			return
		}
		encoded <- wr.Close()
	}()
	rs, err := sess.ReceivePack(ctx, req)
	if err != nil {
		rd.Close()
		<-encoded
		return err
	}
	if err := <-encoded; err != nil {
		return err
	}
	if rs != nil {
		return rs.Error()
	}
	return nil
}

func short(h plumbing.Hash) string {
	if h.IsZero() {
		return "nothing"
	}
	return h.String()[:12]
}

// newObjects lists the objects of the commits from old (exclusive) to
// newHash along first parents, and of their trees what their parent's
// tree lacks.
func (r *Repo) newObjects(newHash, old plumbing.Hash) ([]plumbing.Hash, error) {
	s := r.git.Storer
	var out []plumbing.Hash
	seen := map[plumbing.Hash]bool{}
	h := newHash
	for n := 0; h != old; n++ {
		if n == maxPushCommits {
			return nil, errNotSimple
		}
		c, err := object.GetCommit(s, h)
		if err != nil {
			return nil, err
		}
		out = append(out, c.Hash)
		var before plumbing.Hash
		switch {
		case c.NumParents() == 1:
			before = c.ParentHashes[0]
		case c.NumParents() == 0 && old.IsZero():
		default:
			return nil, errNotSimple
		}
		var beforeTree plumbing.Hash
		if !before.IsZero() {
			p, err := object.GetCommit(s, before)
			if err != nil {
				return nil, err
			}
			beforeTree = p.TreeHash
		}
		if err := treeAdds(s, c.TreeHash, beforeTree, seen, &out); err != nil {
			return nil, err
		}
		h = before
	}
	return out, nil
}

// treeAdds appends the objects of tree that were not in before (by path
// and hash): a subtree whose hash is unchanged is not entered.
func treeAdds(s storer.EncodedObjectStorer, tree, before plumbing.Hash, seen map[plumbing.Hash]bool, out *[]plumbing.Hash) error {
	if tree == before || seen[tree] {
		return nil
	}
	t, err := object.GetTree(s, tree)
	if err != nil {
		return err
	}
	seen[tree] = true
	*out = append(*out, tree)
	old := map[string]object.TreeEntry{}
	if !before.IsZero() {
		b, err := object.GetTree(s, before)
		if err != nil {
			return err
		}
		for _, e := range b.Entries {
			old[e.Name] = e
		}
	}
	for _, e := range t.Entries {
		prev, ok := old[e.Name]
		if ok && prev.Hash == e.Hash {
			continue
		}
		switch e.Mode {
		case filemode.Submodule:
			continue // a commit of another repository
		case filemode.Dir:
			var was plumbing.Hash
			if ok && prev.Mode == filemode.Dir {
				was = prev.Hash
			}
			if err := treeAdds(s, e.Hash, was, seen, out); err != nil {
				return err
			}
		default:
			if !seen[e.Hash] {
				seen[e.Hash] = true
				*out = append(*out, e.Hash)
			}
		}
	}
	return nil
}

// serverSaid keeps the last of what a server said on a push's progress
// side band (its hooks' messages: "env/dev is protected", "commits must be
// signed"), for the error that reports the push refused.
type serverSaid struct {
	mu  sync.Mutex
	buf []byte
}

const serverSaidMax = 4 << 10

func (s *serverSaid) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	if len(s.buf) > serverSaidMax {
		s.buf = s.buf[len(s.buf)-serverSaidMax:]
	}
	return len(p), nil
}

// String is what the server said, one line after another, without
// progress counters and control characters, at most 500 bytes (the end).
func (s *serverSaid) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lines []string
	for _, l := range strings.FieldsFunc(string(s.buf), func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(strings.Map(func(r rune) rune {
			if unicode.IsPrint(r) {
				return r
			}
			return -1
		}, l))
		if l != "" && !strings.HasPrefix(l, "Resolving deltas") && !strings.HasPrefix(l, "Unpacking objects") {
			lines = append(lines, l)
		}
	}
	out := strings.Join(lines, " / ")
	if len(out) > 500 {
		out = "…" + out[len(out)-500:]
	}
	return out
}
