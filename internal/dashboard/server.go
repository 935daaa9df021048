// Package dashboard serves Sluice's web dashboard: every ManifestSync with
// its source, destination and pinned images, live as the cluster changes.
// Pages are rendered on the server (html/template, embedded); a small
// script only swaps a page's live part when the server says, over
// server-sent events, that what it shows changed.
package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/cluster"
	"sluice.dev/sluice/internal/preview"
	"sluice.dev/sluice/internal/session"
)

//go:embed web
var web embed.FS

// Options configure the dashboard.
type Options struct {
	// Namespace limits the dashboard to one namespace; empty shows all
	// that the identity may list.
	Namespace string
	// PageSize is how many rows a table page shows; the default is 50.
	PageSize int
	// Log receives the server's errors; the default discards them.
	Log *slog.Logger
	// ReadOnly refuses every action (stopping sessions, releasing
	// locks, ...) and shows none.
	ReadOnly bool
	// Auth, when set, serves each person as themselves (a controller's
	// dashboard); nil serves everyone as cfg's identity (a person's own,
	// on localhost).
	Auth *Auth
	// Preview reads the syncs' repositories: what the next hydration
	// would change, the folder's provenance and history. Nil reads none.
	Preview *preview.Previewer
}

// Server is the dashboard over one cluster, reading through a cache the
// cluster keeps current by watches.
type Server struct {
	o       Options
	cache   cache.Cache
	reader  client.Reader
	events  *broker
	pages   map[string]*template.Template
	mux     *http.ServeMux
	protect http.Handler
	clients *clients
	flashes flashes
	csrfKey []byte
	auth    *authn
	// watchImages says the identity may watch Images (they are then read
	// from the cache, and pages follow them).
	watchImages bool
}

// New connects to the cluster as cfg's identity and starts watching what
// the dashboard shows; it serves once the first lists are in. The watches
// end with ctx.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Server, error) {
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	co := cache.Options{Scheme: scheme}
	if o.Namespace != "" {
		co.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	// Sessions live in their own namespace, as Leases.
	co.ByObject = map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {
		Namespaces: map[string]cache.Config{session.SystemNamespace: {}},
	}}
	c, err := cache.New(cfg, co)
	if err != nil {
		return nil, fmt.Errorf("watching the cluster: %w", err)
	}
	base, err := cluster.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	s := &Server{o: o, cache: c, reader: c, events: newBroker(250 * time.Millisecond), csrfKey: []byte(rand.Text()),
		clients: &clients{base: base}}
	if o.Auth != nil {
		s.auth = &authn{a: *o.Auth, c: base.Kube(), cfg: cfg, sessions: map[string]loginSession{}, reviews: map[string]review{}, access: map[string]review{}}
		s.clients.make = s.auth.impersonating
	}
	if err := s.parse(); err != nil {
		return nil, err
	}
	inf, err := c.GetInformer(ctx, &v1alpha1.ManifestSync{})
	if err != nil {
		return nil, fmt.Errorf("watching ManifestSyncs: %w", err)
	}
	inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.events.publish("syncs"); s.events.publish("images") },
		UpdateFunc: func(any, any) { s.events.publish("syncs"); s.events.publish("images") },
		DeleteFunc: func(any) { s.events.publish("syncs"); s.events.publish("images") },
	})
	if watchSessions, err := mayWatch(ctx, base, "coordination.k8s.io", "leases", session.SystemNamespace); err != nil {
		return nil, err
	} else if watchSessions {
		inf, err := c.GetInformer(ctx, &coordinationv1.Lease{})
		if err != nil {
			return nil, fmt.Errorf("watching sessions: %w", err)
		}
		inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.events.publish("sessions") },
			UpdateFunc: func(any, any) { s.events.publish("sessions") },
			DeleteFunc: func(any) { s.events.publish("sessions") },
		})
	}
	if s.watchImages, err = mayWatch(ctx, base, "sluice.dev", "images", o.Namespace); err != nil {
		return nil, err
	} else if s.watchImages {
		inf, err := c.GetInformer(ctx, &v1alpha1.Image{})
		if err != nil {
			return nil, fmt.Errorf("watching Images: %w", err)
		}
		inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.events.publish("images") },
			UpdateFunc: func(any, any) { s.events.publish("images") },
			DeleteFunc: func(any) { s.events.publish("images") },
		})
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			o.Log.Error("watching the cluster", "err", err)
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("listing ManifestSyncs: the cluster did not answer within a minute (can this identity list manifestsyncs.sluice.dev%s?)", inNamespace(o.Namespace))
	}
	s.routes()
	return s, nil
}

// mayWatch asks the API server whether this identity may list and watch
// a resource in a namespace.
func mayWatch(ctx context.Context, c *cluster.Client, group, resource, ns string) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns},
		}}
		if err := c.Kube().Create(ctx, r); err != nil {
			return false, fmt.Errorf("asking the API server what this identity may see: %w", err)
		}
		if !r.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return " in every namespace"
	}
	return " in namespace " + ns
}

func (s *Server) parse() error {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(web, "web/layout.html")
	if err != nil {
		return err
	}
	s.pages = map[string]*template.Template{}
	for _, page := range []string{"syncs.html", "sync.html", "sessions.html", "session.html", "history.html", "changes.html", "login.html", "takeovers.html", "images.html", "branches.html", "branch.html", "pull.html"} {
		t, err := template.Must(base.Clone()).ParseFS(web, "web/"+page)
		if err != nil {
			return err
		}
		s.pages[page] = t
	}
	return nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	// A POST from a page of another origin is refused before any form
	// token is looked at.
	s.protect = http.NewCrossOriginProtection().Handler(s.authenticated(s.mux))
	static, _ := fs.Sub(web, "web/static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/syncs", http.StatusFound)
	})
	s.mux.HandleFunc("GET /syncs", s.syncs)
	s.mux.HandleFunc("GET /syncs/{namespace}/{name}", s.sync)
	s.mux.HandleFunc("GET /syncs/{namespace}/{name}/history", s.history)
	s.mux.HandleFunc("GET /syncs/{namespace}/{name}/changes", s.changes)
	s.mux.HandleFunc("GET /login", s.login)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /takeovers", s.takeovers)
	back := func(*http.Request) string { return "/takeovers" }
	s.mux.HandleFunc("POST /takeovers/{namespace}/{name}/release", s.action(back, s.releaseLock))
	s.mux.HandleFunc("POST /takeovers/{namespace}/{name}/extend", s.action(back, s.extendLock))
	s.mux.HandleFunc("GET /images", s.images)
	s.mux.HandleFunc("GET /pulls/{namespace}", s.pull)
	s.mux.HandleFunc("GET /branches", s.branches)
	s.mux.HandleFunc("GET /branch", s.branch)
	s.mux.HandleFunc("GET /sessions", s.sessions)
	s.mux.HandleFunc("GET /sessions/{name}", s.session)
	s.mux.HandleFunc("POST /sessions/{name}/stop", s.action(func(r *http.Request) string { return "/sessions/" + r.PathValue("name") }, s.stopSession))
	s.mux.HandleFunc("POST /sessions/cleanup", s.action(func(*http.Request) string { return "/sessions" }, s.cleanupSessions))
	s.mux.HandleFunc("GET /events", s.events.serve)
}

// ServeHTTP serves the dashboard, with the headers every page gets.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	s.protect.ServeHTTP(w, r)
}

// render writes a page, or only its live part when the page's script asks
// (X-Fragment), which it swaps in place.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page string, data any) {
	t := s.pages[page]
	name := "layout.html"
	if r.Header.Get("X-Fragment") != "" {
		name = "live"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := t.ExecuteTemplate(w, name, data); err != nil {
		s.o.Log.Error("rendering", "page", page, "err", err)
	}
}

// writeTimeout bounds writing a response: the longest page is a
// preview, bounded at 2 minutes itself.
const writeTimeout = 3 * time.Minute

// Serve serves the dashboard on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	// Bounded everywhere a client could hold a connection: its headers
	// (their time and size), its body, the response (a slow reader), the
	// idle wait between requests. The event streams extend their own
	// write deadline as they go.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: writeTimeout, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	go func() {
		<-ctx.Done()
		s.events.close()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Listen serves the dashboard on addr until ctx ends, and returns the
// address it listens on at once.
func (s *Server) Listen(ctx context.Context, addr string) (string, <-chan error, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("dashboard address %s: %w", addr, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	return l.Addr().String(), done, nil
}
