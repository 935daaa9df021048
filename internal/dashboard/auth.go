package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/cluster"
)

// Auth makes the dashboard of a controller serve each person as
// themselves: every request names a user the API server knows (a bearer
// token it reviews, given once on the login page or on each request, or
// a user an authenticating proxy in front passes), every read is
// authorized for that user by the API server (SubjectAccessReview), and
// every action and every Secret read is made as that user
// (impersonation). The controller's own identity only watches and asks.
type Auth struct {
	// UserHeader and GroupHeader, when set, name the headers an
	// authenticating proxy passes the user and their groups in (for
	// example X-Forwarded-User, X-Forwarded-Groups). Only set them when
	// nothing but that proxy can reach the dashboard.
	UserHeader, GroupHeader string
	// SecureCookies marks the session cookie Secure (the dashboard is
	// served over TLS, or behind a proxy that is).
	SecureCookies bool
}

const cookieName = "sluice-session"

// authn keeps who is logged in, and what the API server answered.
type authn struct {
	a   Auth
	c   client.Client
	cfg *rest.Config

	mu       sync.Mutex
	sessions map[string]loginSession // cookie → user
	reviews  map[string]review       // token digest → user
	access   map[string]review       // user + attributes → allowed
}

type loginSession struct {
	user    *User
	expires time.Time
}

type review struct {
	user    *User
	allowed bool
	reason  string
	at      time.Time
}

const (
	loginFor  = 8 * time.Hour
	reviewFor = time.Minute
	accessFor = 10 * time.Second
)

// userOfRequest is who r is from; nil when nobody logged in.
func (n *authn) userOfRequest(r *http.Request) (*User, error) {
	if h := n.a.UserHeader; h != "" {
		if name := r.Header.Get(h); name != "" {
			u := &User{Name: name}
			if g := n.a.GroupHeader; g != "" {
				for _, v := range r.Header.Values(g) {
					for _, grp := range strings.Split(v, ",") {
						if grp = strings.TrimSpace(grp); grp != "" {
							u.Groups = append(u.Groups, grp)
						}
					}
				}
			}
			u.Groups = append(u.Groups, "system:authenticated")
			return u, nil
		}
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return n.review(r.Context(), strings.TrimSpace(tok))
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		n.mu.Lock()
		defer n.mu.Unlock()
		if s, ok := n.sessions[ck.Value]; ok && time.Now().Before(s.expires) {
			return s.user, nil
		}
	}
	return nil, nil
}

// review asks the API server who a token is (TokenReview).
func (n *authn) review(ctx context.Context, token string) (*User, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	n.mu.Lock()
	if r, ok := n.reviews[key]; ok && time.Since(r.at) < reviewFor {
		n.mu.Unlock()
		return r.user, nil
	}
	n.mu.Unlock()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := n.c.Create(ctx, tr); err != nil {
		return nil, fmt.Errorf("asking the API server who the token is: %w", err)
	}
	var u *User
	if tr.Status.Authenticated {
		ui := tr.Status.User
		u = &User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups, Extra: map[string][]string{}}
		for k, v := range ui.Extra {
			u.Extra[k] = v
		}
	}
	n.mu.Lock()
	if len(n.reviews) > 10_000 {
		clear(n.reviews)
	}
	n.reviews[key] = review{user: u, at: time.Now()}
	n.mu.Unlock()
	return u, nil
}

// allowed asks the API server whether u may verb a resource
// (SubjectAccessReview), remembering the answer a few seconds.
func (n *authn) allowed(ctx context.Context, u *User, verb, group, resource, ns, name string) error {
	key := strings.Join([]string{u.key(), verb, group, resource, ns, name}, "\x00")
	n.mu.Lock()
	r, ok := n.access[key]
	n.mu.Unlock()
	if !ok || time.Since(r.at) > accessFor {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, UID: u.UID, Groups: u.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name},
		}}
		if len(u.Extra) > 0 {
			sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
			for k, v := range u.Extra {
				sar.Spec.Extra[k] = v
			}
		}
		if err := n.c.Create(ctx, sar); err != nil {
			return fmt.Errorf("asking the API server what %s may do: %w", u.Name, err)
		}
		r = review{allowed: sar.Status.Allowed, reason: sar.Status.Reason, at: time.Now()}
		n.mu.Lock()
		if len(n.access) > 10_000 {
			clear(n.access)
		}
		n.access[key] = r
		n.mu.Unlock()
	}
	if r.allowed {
		return nil
	}
	what := resource
	if group != "" {
		what += "." + group
	}
	where := " in every namespace"
	if ns != "" {
		where = " in namespace " + ns
	}
	if name != "" {
		what += " " + name
	}
	return forbidden("%s may not %s %s%s", u.Name, verb, what, where)
}

// impersonating is a client acting as u.
func (n *authn) impersonating(u *User) (*cluster.Client, error) {
	cfg := rest.CopyConfig(n.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	return cluster.New(cfg)
}

// login shows the login page, and logs in with a token.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	p := struct {
		Title, Nav, Next, Err string
	}{Title: "Log in", Next: safeNext(r.FormValue("next"))}
	if r.Method == http.MethodPost {
		u, err := s.auth.review(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
		switch {
		case err != nil:
			p.Err = err.Error()
		case u == nil:
			p.Err = "the API server does not accept this token"
		default:
			id := rand.Text()
			s.auth.mu.Lock()
			now := time.Now()
			for k, v := range s.auth.sessions {
				if now.After(v.expires) {
					delete(s.auth.sessions, k)
				}
			}
			s.auth.sessions[id] = loginSession{user: u, expires: now.Add(loginFor)}
			s.auth.mu.Unlock()
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: s.auth.a.SecureCookies,
				SameSite: http.SameSiteStrictMode, MaxAge: int(loginFor.Seconds())})
			http.Redirect(w, r, p.Next, http.StatusSeeOther)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}
	s.render(w, r, "login.html", p)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		s.auth.mu.Lock()
		delete(s.auth.sessions, ck.Value)
		s.auth.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.auth.a.SecureCookies, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext keeps a redirect on this dashboard: a path of it, nothing a
// browser could read as another host ("//evil.example", "/\\evil.example":
// browsers take a backslash for a slash), no control character.
func safeNext(next string) string {
	u, err := url.Parse(next)
	switch {
	case err != nil, next == "", u.Scheme != "", u.Host != "", u.User != nil, u.Opaque != "",
		!strings.HasPrefix(next, "/"), len(next) > 1 && (next[1] == '/' || next[1] == '\\'),
		strings.ContainsAny(next, "\\"), strings.IndexFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "/syncs"
	}
	return next
}

// authenticated lets through requests from a known user (with the user in
// their context), and sends the others to the login page.
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth == nil || r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		u, err := s.auth.userOfRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if u == nil {
			if r.Method == http.MethodGet && r.Header.Get("X-Fragment") == "" && r.URL.Path != "/events" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first: a bearer token the API server accepts", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(withUser(r.Context(), u)))
	})
}

// allowed says whether the request's user may verb a resource; a person's
// own dashboard reads as the kubeconfig's identity, which the API server
// checks itself.
func (s *Server) allowed(ctx context.Context, verb, group, resource, ns, name string) error {
	u := userOf(ctx)
	if s.auth == nil || u == nil {
		return nil
	}
	return s.auth.allowed(ctx, u, verb, group, resource, ns, name)
}

// visible tells which namespaces the request's user may list syncs in:
// all of them, or in ns, when they may list there; otherwise those the
// API server allows one by one.
func (s *Server) visible(ctx context.Context, ns string) (func(string) bool, error) {
	all := func(string) bool { return true }
	err := s.allowed(ctx, "list", "sluice.dev", "manifestsyncs", ns, "")
	if err == nil {
		return all, nil
	}
	if ns != "" || !errors.Is(err, errForbidden) {
		return func(string) bool { return false }, err
	}
	seen := map[string]bool{}
	return func(ns string) bool {
		ok, done := seen[ns]
		if !done {
			ok = s.allowed(ctx, "list", "sluice.dev", "manifestsyncs", ns, "") == nil
			seen[ns] = ok
		}
		return ok
	}, nil
}

// mayAct checks, before an action, that the request's user may verb the
// resource: a SubjectAccessReview for a controller's dashboard, a
// SelfSubjectAccessReview of the kubeconfig's identity for a person's.
func (s *Server) mayAct(ctx context.Context, verb, group, resource, ns, name string) error {
	if s.auth != nil {
		if u := userOf(ctx); u != nil {
			return s.auth.allowed(ctx, u, verb, group, resource, ns, name)
		}
	}
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name},
	}}
	if err := s.clients.base.Kube().Create(ctx, r); err != nil {
		return fmt.Errorf("asking the API server what you may do: %w", err)
	}
	if !r.Status.Allowed {
		return forbidden("you may not %s %s.%s %s in namespace %s", verb, resource, group, name, ns)
	}
	return nil
}
