package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/session"
)

type sessionsPage struct {
	Title, Nav string
	Sessions   []session.Info
	Flash      *flash
	CSRF       string
	ReadOnly   bool
	Err        string
}

func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	u := userOf(r.Context())
	p := sessionsPage{Title: "Live sessions", Nav: "sessions", CSRF: s.csrfToken(u), ReadOnly: s.o.ReadOnly,
		Flash: s.flashes.take(u, r.URL.Query().Get("done"))}
	c, err := s.clients.of(u)
	if err == nil {
		p.Sessions, err = session.List(r.Context(), c)
	}
	if err != nil {
		p.Err = listError(err)
	}
	s.render(w, r, "sessions.html", p)
}

type sessionPage struct {
	Title, Nav string
	Details    session.Details
	// Diffs are a version-mode session's namespaces against those they
	// run beside.
	Diffs    []*cluster.NamespaceDiff
	DiffErr  string
	Flash    *flash
	CSRF     string
	ReadOnly bool
	Gone     bool
	Err      string
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	u := userOf(r.Context())
	p := sessionPage{Title: "Session " + name, Nav: "sessions", CSRF: s.csrfToken(u), ReadOnly: s.o.ReadOnly,
		Flash: s.flashes.take(u, r.URL.Query().Get("done"))}
	c, err := s.clients.of(u)
	if err == nil {
		p.Details, err = session.Describe(r.Context(), c, name)
	}
	switch {
	case errors.Is(err, session.ErrNoSession):
		p.Gone = true
	case err != nil:
		p.Err = listError(err)
	default:
		for _, ns := range sortedKeys(p.Details.Shadows) {
			d, err := c.DiffNamespaces(r.Context(), p.Details.Shadows[ns], ns)
			if err != nil {
				p.DiffErr = err.Error()
				break
			}
			p.Diffs = append(p.Diffs, d)
		}
	}
	s.render(w, r, "session.html", p)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// stopSession ends a session as `sluice run stop` does: the session puts
// everything back itself when its process is alive, the dashboard does it
// from the record when not.
func (s *Server) stopSession(r *http.Request) (string, error) {
	name := r.PathValue("name")
	c, err := s.clients.of(userOf(r.Context()))
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	res, err := session.StopSession(ctx, c, name, session.StopOptions{Holder: "dashboard:" + userName(userOf(r.Context()))})
	if err != nil {
		return "", fmt.Errorf("stopping session %s: %w", name, err)
	}
	return "stopped session " + name + ": " + restored(res), nil
}

// cleanupSessions restores every stale session, as `sluice run cleanup`.
func (s *Server) cleanupSessions(r *http.Request) (string, error) {
	c, err := s.clients.of(userOf(r.Context()))
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	res, err := session.Cleanup(ctx, c, false, session.StopOptions{Holder: "dashboard:" + userName(userOf(r.Context()))})
	if err != nil {
		return "", fmt.Errorf("cleaning up stale sessions: %w", err)
	}
	if len(res) == 0 {
		return "no stale session to clean up", nil
	}
	var out []string
	for _, r := range res {
		out = append(out, r.Session+": "+restored(r))
	}
	return "cleaned up " + strings.Join(out, "; "), nil
}

func restored(r *session.Restoration) string {
	if r == nil {
		return "nothing to put back"
	}
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{len(r.Deleted), "deleted"}, {len(r.Restored), "restored"}, {len(r.Resumed), "handed back to GitOps"}, {len(r.Kept), "kept for GitOps"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	if len(parts) == 0 {
		return "nothing to put back"
	}
	return strings.Join(parts, ", ")
}
