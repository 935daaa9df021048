package dashboard

import (
	"cmp"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/source"
)

// branchRow is a destination branch and the syncs writing it.
type branchRow struct {
	Repo, Branch string
	Syncs        []syncRow
	Link         string
}

type branchesPage struct {
	Title, Nav string
	Branches   []branchRow
	Branch     *branchRow
	History    *preview.Branch
	Timeline   template.HTML
	Err        string
}

// destinations groups the syncs the request's user may see by the branch
// they write.
func (s *Server) destinations(r *http.Request) ([]branchRow, error) {
	visible, err := s.visible(r.Context(), s.o.Namespace)
	if err != nil {
		return nil, err
	}
	var list v1alpha1.ManifestSyncList
	if err := s.reader.List(r.Context(), &list, client.InNamespace(s.o.Namespace)); err != nil {
		return nil, err
	}
	by := map[[2]string]*branchRow{}
	for i := range list.Items {
		ms := &list.Items[i]
		if !visible(ms.Namespace) {
			continue
		}
		row := rowOf(ms)
		key := [2]string{row.Destination.Repo, ms.Spec.Destination.Branch}
		b, ok := by[key]
		if !ok {
			b = &branchRow{Repo: key[0], Branch: key[1], Link: "/branch?" + url.Values{"repo": {key[0]}, "branch": {key[1]}}.Encode()}
			by[key] = b
		}
		b.Syncs = append(b.Syncs, row)
	}
	out := make([]branchRow, 0, len(by))
	for _, b := range by {
		slices.SortFunc(b.Syncs, func(x, y syncRow) int {
			return cmp.Or(cmp.Compare(x.Destination.Path, y.Destination.Path), cmp.Compare(x.Name, y.Name))
		})
		out = append(out, *b)
	}
	slices.SortFunc(out, func(x, y branchRow) int { return cmp.Or(cmp.Compare(x.Repo, y.Repo), cmp.Compare(x.Branch, y.Branch)) })
	return out, nil
}

func (s *Server) branches(w http.ResponseWriter, r *http.Request) {
	p := branchesPage{Title: "Destinations", Nav: "branches"}
	var err error
	if p.Branches, err = s.destinations(r); err != nil {
		p.Err = actionError(err)
	}
	s.render(w, r, "branches.html", p)
}

// branch draws the recent commits of one destination branch, a lane per
// sync folder.
func (s *Server) branch(w http.ResponseWriter, r *http.Request) {
	repo, name := r.URL.Query().Get("repo"), r.URL.Query().Get("branch")
	p := branchesPage{Title: name, Nav: "branches"}
	all, err := s.destinations(r)
	if err == nil {
		i := slices.IndexFunc(all, func(b branchRow) bool { return b.Repo == repo && b.Branch == name })
		if i < 0 {
			err = errors.New("no sync you may see writes this branch")
		} else {
			p.Branch = &all[i]
		}
	}
	if err == nil && s.o.Preview == nil {
		err = errors.New("this dashboard reads no git repository")
	}
	var c *cluster.Client
	if err == nil {
		c, err = s.clients.of(userOf(r.Context()))
	}
	if err == nil {
		folders := make([]string, len(p.Branch.Syncs))
		for i, sr := range p.Branch.Syncs {
			folders[i] = sr.Destination.Path
		}
		ctx := source.ContextWithNotBefore(r.Context(), time.Now())
		p.History, err = s.o.Preview.BranchHistory(ctx, c.Kube(), p.Branch.Syncs[0].Sync, folders, 60)
		if p.History != nil {
			p.Timeline = lanes(p.History.History, p.Branch.Syncs, repo)
		}
	}
	if err != nil {
		p.Err = actionError(err)
	}
	s.render(w, r, "branch.html", p)
}
