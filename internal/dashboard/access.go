package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"sluice.dev/sluice/internal/cluster"
)

// User is who a request comes from, as the API server knows them. The
// dashboard of a laptop has none: every request is the kubeconfig's
// identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

func (u *User) key() string {
	if u == nil {
		return ""
	}
	return u.Name + "\x00" + strings.Join(u.Groups, "\x00")
}

type userKey struct{}

func withUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

func userOf(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

// flashes hold the outcome of an action for the page the browser is sent
// back to (post, redirect, get), for a minute.
type flashes struct {
	mu sync.Mutex
	m  map[string]flash
}

type flash struct {
	Text  string
	Error bool
	user  string
	at    time.Time
}

func (f *flashes) put(u *User, text string, isErr bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]flash{}
	}
	now := time.Now()
	for k, v := range f.m {
		if now.Sub(v.at) > time.Minute {
			delete(f.m, k)
		}
	}
	id := rand.Text()[:16]
	f.m[id] = flash{Text: text, Error: isErr, user: u.key(), at: now}
	return id
}

func (f *flashes) take(u *User, id string) *flash {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[id]
	if !ok || v.user != u.key() {
		return nil
	}
	delete(f.m, id)
	return &v
}

// csrfToken is what an action's form carries: a MAC of the user under a
// key of this server's, so a page of another origin cannot forge one.
func (s *Server) csrfToken(u *User) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("csrf\x00" + u.key()))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// action runs a POST: refused in read-only mode and without the form's
// token; f's error (the API server's refusal, for a user without the
// rights) is shown on the page the browser is sent back to.
func (s *Server) action(back func(*http.Request) string, f func(r *http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.ReadOnly {
			http.Error(w, "the dashboard is read-only (--read-only)", http.StatusForbidden)
			return
		}
		u := userOf(r.Context())
		if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrfToken(u))) {
			http.Error(w, "the form's token is missing or stale: reload the page and try again", http.StatusForbidden)
			return
		}
		msg, err := f(r)
		var id string
		if err != nil {
			s.o.Log.Info("action refused", "path", r.URL.Path, "user", userName(u), "err", err)
			id = s.flashes.put(u, actionError(err), true)
		} else {
			s.o.Log.Info("action", "path", r.URL.Path, "user", userName(u), "result", msg)
			id = s.flashes.put(u, msg, false)
		}
		to := back(r)
		sep := "?"
		if strings.Contains(to, "?") {
			sep = "&"
		}
		http.Redirect(w, r, to+sep+"done="+id, http.StatusSeeOther)
	}
}

func userName(u *User) string {
	if u == nil {
		return "(kubeconfig identity)"
	}
	return u.Name
}

// actionError is an action's failure in one line; a refusal by RBAC says
// so first.
func actionError(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && apierrors.IsForbidden(err) {
		return "refused: " + status.Status().Message
	}
	if errors.Is(err, errForbidden) {
		return "refused: " + err.Error()
	}
	return err.Error()
}

var errForbidden = errors.New("forbidden")

// clients are the cluster clients requests act through: the server's own
// for the kubeconfig's identity, one impersonating each user otherwise.
type clients struct {
	mu    sync.Mutex
	base  *cluster.Client
	users map[string]*userClient
	make  func(*User) (*cluster.Client, error)
}

type userClient struct {
	c    *cluster.Client
	used time.Time
}

func (c *clients) of(u *User) (*cluster.Client, error) {
	if u == nil {
		return c.base, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if uc, ok := c.users[u.key()]; ok {
		uc.used = now
		return uc.c, nil
	}
	cl, err := c.make(u)
	if err != nil {
		return nil, err
	}
	if c.users == nil {
		c.users = map[string]*userClient{}
	}
	for k, v := range c.users {
		if now.Sub(v.used) > 10*time.Minute {
			delete(c.users, k)
		}
	}
	c.users[u.key()] = &userClient{c: cl, used: now}
	return cl, nil
}

func forbidden(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errForbidden}, args...)...)
}
