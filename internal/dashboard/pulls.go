package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	prreview "sluice.dev/sluice/internal/review"
	"sluice.dev/sluice/internal/source"
)

// PullPath is the path of a source pull request's page: what it would
// change in every deploy folder of a namespace, whole (the comment on the
// pull request is cut from it). A controller links to it from the
// comment and the commit status.
func PullPath(namespace, repo, base, head, commit string, number int) string {
	q := make([]string, 0, 5)
	add := func(k, v string) {
		if v != "" {
			q = append(q, k+"="+url.QueryEscape(v))
		}
	}
	add("repo", source.Redact(repo))
	add("base", base)
	add("number", strconv.Itoa(number))
	add("head", head)
	add("commit", commit)
	return "/pulls/" + namespace + "?" + strings.Join(q, "&")
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// pullQuery is a pull request page's request, checked: the repository
// must be one a sync of the namespace reads (the page reads nothing
// else), the head a pull request's ref of its number or a branch.
type pullQuery struct {
	Repo, Base, Head, Commit string
	Number                   int
}

func parsePullQuery(r *http.Request) (pullQuery, error) {
	v := r.URL.Query()
	q := pullQuery{Repo: v.Get("repo"), Base: v.Get("base"), Head: v.Get("head"), Commit: v.Get("commit")}
	n, err := strconv.Atoi(v.Get("number"))
	if err != nil || n <= 0 {
		return q, fmt.Errorf("number %q: not a pull request's number", v.Get("number"))
	}
	q.Number = n
	if q.Repo == "" || q.Base == "" {
		return q, fmt.Errorf("repo and base are required")
	}
	if err := plumbing.NewBranchReferenceName(q.Base).Validate(); err != nil || strings.HasPrefix(q.Base, "-") {
		return q, fmt.Errorf("base %q: not a branch name", q.Base)
	}
	switch q.Head {
	case "", fmt.Sprintf("refs/pull/%d/head", n), fmt.Sprintf("refs/merge-requests/%d/head", n):
	default:
		if err := plumbing.NewBranchReferenceName(q.Head).Validate(); err != nil || strings.HasPrefix(q.Head, "refs/") || strings.HasPrefix(q.Head, "-") {
			return q, fmt.Errorf("head %q: neither pull request %d's ref nor a branch", q.Head, n)
		}
	}
	if q.Head == "" {
		q.Head = fmt.Sprintf("refs/pull/%d/head", n)
	}
	if q.Commit != "" && !fullSHA.MatchString(q.Commit) {
		return q, fmt.Errorf("commit %q: not a full commit SHA", q.Commit)
	}
	return q, nil
}

type pullPage struct {
	Title, Nav, Err string
	Namespace       string
	Query           pullQuery
	Report          *prreview.Report
	Summary         string
	Branches        []pullBranch
	Elapsed         time.Duration
}

type pullBranch struct {
	Repo, Branch string
	Syncs        []pullSync
}

type pullSync struct {
	prreview.Sync
	Lines []diffLine
}

// pull previews a source pull request for the namespace's syncs that
// follow its base, as the person asking (whose rights decide which syncs
// and Secrets it reads).
func (s *Server) pull(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("namespace")
	p := pullPage{Nav: "syncs", Namespace: ns}
	q, err := parsePullQuery(r)
	p.Query, p.Title = q, fmt.Sprintf("Pull request %d", q.Number)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		p.Err = err.Error()
		s.render(w, r, "pull.html", p)
		return
	}
	if err := s.allowed(r.Context(), "list", "sluice.dev", "manifestsyncs", ns, ""); err != nil {
		w.WriteHeader(http.StatusForbidden)
		p.Err = actionError(err)
		s.render(w, r, "pull.html", p)
		return
	}
	want, err := source.ParseLocation(q.Repo, "/")
	if err != nil || want.IsLocal() {
		w.WriteHeader(http.StatusBadRequest)
		p.Err = fmt.Sprintf("repo %q: not a remote repository", q.Repo)
		s.render(w, r, "pull.html", p)
		return
	}
	var list v1alpha1.ManifestSyncList
	if err := s.reader.List(r.Context(), &list, client.InNamespace(ns)); err != nil {
		p.Err = listError(err)
		s.render(w, r, "pull.html", p)
		return
	}
	var syncs []*v1alpha1.ManifestSync
	repo := ""
	for i := range list.Items {
		ms := &list.Items[i]
		loc, err := source.ParseLocation(ms.Spec.Source.Repo, "/")
		if err != nil || loc.IsLocal() || loc.Repository() != want.Repository() {
			continue
		}
		if ms.Spec.Source.Follows(q.Base) {
			syncs, repo = append(syncs, ms), ms.Spec.Source.Repo
		}
	}
	c, err := s.clients.of(userOf(r.Context()))
	switch {
	case s.o.Preview == nil:
		p.Err = "this dashboard reads no git repository"
	case err != nil:
		p.Err = err.Error()
	case len(syncs) == 0:
		w.WriteHeader(http.StatusNotFound)
		p.Err = fmt.Sprintf("No ManifestSync of %s reads %s at %s.", ns, source.Redact(q.Repo), q.Base)
	default:
		start := time.Now()
		ctx := source.ContextWithNotBefore(r.Context(), start)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		rep, err := s.o.Preview.PullRequest(ctx, c.Kube(), syncs, prreview.Change{Repo: repo, Base: q.Base, Head: q.Head, HeadCommit: q.Commit})
		p.Elapsed = time.Since(start).Round(time.Millisecond)
		if err != nil {
			p.Err = err.Error()
			break
		}
		p.Report, p.Summary = rep, rep.Summary()
		for _, sy := range rep.Syncs {
			if n := len(p.Branches); n == 0 || p.Branches[n-1].Repo != sy.Repo || p.Branches[n-1].Branch != sy.Branch {
				p.Branches = append(p.Branches, pullBranch{Repo: sy.Repo, Branch: sy.Branch})
			}
			b := &p.Branches[len(p.Branches)-1]
			b.Syncs = append(b.Syncs, pullSync{Sync: sy, Lines: diffLines(sy.Diff)})
		}
	}
	s.render(w, r, "pull.html", p)
}
