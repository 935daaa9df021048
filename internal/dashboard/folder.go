package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
)

// syncOf reads the sync a request names, answering the page itself when
// it cannot.
func (s *Server) syncOf(w http.ResponseWriter, r *http.Request, page string) (*v1alpha1.ManifestSync, bool) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := s.allowed(r.Context(), "get", "sluice.dev", "manifestsyncs", ns, name); err != nil {
		w.WriteHeader(http.StatusForbidden)
		s.render(w, r, page, errorPage{Title: name, Nav: "syncs", Err: actionError(err)})
		return nil, false
	}
	var ms v1alpha1.ManifestSync
	if err := s.reader.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &ms); err != nil {
		msg := listError(err)
		if apierrors.IsNotFound(err) {
			w.WriteHeader(http.StatusNotFound)
			msg = fmt.Sprintf("ManifestSync %s/%s does not exist (any more).", ns, name)
		}
		s.render(w, r, page, errorPage{Title: name, Nav: "syncs", Err: msg})
		return nil, false
	}
	return &ms, true
}

// errorPage is any page that could not be made.
type errorPage struct {
	Title, Nav, Err string
	Sync            syncRow
	Row             syncRow
	Path            string
}

type folderPage struct {
	Title, Nav string
	Sync       syncRow
	Folder     *preview.Folder
	Timeline   template.HTML
	Plan       *hydrate.Result
	Diff       []diffLine
	Elapsed    time.Duration
	Err        string
}

// history shows a sync's folder as the destination has it: its provenance
// and the commits that changed it, drawn on a timeline.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	s.withRepos(w, r, "history.html", func(ms *v1alpha1.ManifestSync, c client.Reader, p *folderPage) (err error) {
		ctx := source.ContextWithNotBefore(r.Context(), time.Now())
		if p.Folder, err = s.o.Preview.Folder(ctx, c, ms, 50); p.Folder != nil {
			p.Timeline = timeline(p.Folder.History, p.Sync.Destination.Repo)
		}
		return err
	})
}

// changes shows what the sync's next hydration would change: a dry run of
// the engine the controller commits with, on demand.
func (s *Server) changes(w http.ResponseWriter, r *http.Request) {
	s.withRepos(w, r, "changes.html", func(ms *v1alpha1.ManifestSync, c client.Reader, p *folderPage) error {
		// A person asks what the repositories and registries hold now.
		start := time.Now()
		ctx := registry.ContextWithNotBefore(source.ContextWithNotBefore(r.Context(), start), start)
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		res, err := s.o.Preview.Plan(ctx, c, ms)
		p.Plan, p.Diff, p.Elapsed = &res, diffLines(res.Diff), time.Since(start).Round(time.Millisecond)
		return err
	})
}

// withRepos renders a page of a sync that reads its repositories through
// f, as the request's user (whose rights decide which Secrets it reads).
func (s *Server) withRepos(w http.ResponseWriter, r *http.Request, page string, f func(*v1alpha1.ManifestSync, client.Reader, *folderPage) error) {
	ms, ok := s.syncOf(w, r, page)
	if !ok {
		return
	}
	p := folderPage{Title: ms.Namespace + "/" + ms.Name, Nav: "syncs", Sync: rowOf(ms)}
	c, err := s.clients.of(userOf(r.Context()))
	switch {
	case s.o.Preview == nil:
		err = errors.New("this dashboard reads no git repository")
	case err == nil:
		err = f(ms, c.Kube(), &p)
	}
	if err != nil {
		p.Err = err.Error()
	}
	s.render(w, r, page, p)
}

// diffLine is a line of a unified diff, classed for colour (and marked by
// its first character, so colour is not the only signal).
type diffLine struct {
	Class, Text string
}

func diffLines(diff string) []diffLine {
	if diff == "" {
		return nil
	}
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		c := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			c = "file"
		case strings.HasPrefix(l, "+"):
			c = "add"
		case strings.HasPrefix(l, "-"):
			c = "del"
		case strings.HasPrefix(l, "@@"):
			c = "hunk"
		}
		out = append(out, diffLine{Class: c, Text: l})
	}
	return out
}
