package controller

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/credentials"
)

// Webhook receivers. A receiver is a Secret labelled
// sluice.dev/receiver=true, holding a token; its URL is
// /hook/NAMESPACE/NAME. GitHub, Gitea and Gitlab push events and a
// registry's push notifications (the distribution "events" format) sent
// to it ask every resource of its namespace that reads the repository (or
// follows the tag) to reconcile at once, by setting their
// reconcile.sluice.dev/requestedAt annotation: whichever replica or shard
// holds them acts on it, and reads what the remote holds since the hook.
const (
	ReceiverLabel = "sluice.dev/receiver"
	receiverKey   = "token"
	hookPrefix    = "/hook/"
	maxHookBody   = 10 << 20
)

type hooks struct {
	client client.Client // the manager's: a cached reader with the indexes
	// direct, if set, queues the syncs' reconciles in this process, with
	// the request, and reports whether it did (it does where this
	// replica leads): no API write per sync then, none for its status
	// unless its reconcile changes something. Elsewhere the request
	// annotation reaches the leader.
	direct  func(syncs []*v1alpha1.ManifestSync, at time.Time, what string) bool
	secrets *credentials.Secrets
	// preview, if set, previews a source pull request for the syncs
	// that follow its base, in the background.
	preview func(ns string, ev pullRequestEvent, syncs []*v1alpha1.ManifestSync)
	log     *slog.Logger
	now     func() time.Time
	// handled are the deliveries acted on, by receiver and delivery ID,
	// in the last hour: a valid request replayed is ignored.
	mu      sync.Mutex
	handled map[string]time.Time
}

// replayWindow is how long a delivery's ID is remembered.
const replayWindow = time.Hour

// maxHandled bounds the deliveries remembered (an hour of a busy
// forge's pushes is far fewer).
const maxHandled = 100_000

// deliveryID is the ID the sender gives a delivery, "" where it gives
// none: GitHub's and Gitea's delivery header, Gitlab's event UUID, the
// registry's event IDs.
func deliveryID(kind string, hdr http.Header, body []byte) string {
	switch kind {
	case "registry":
		var env struct {
			Events []struct {
				ID string `json:"id"`
			} `json:"events"`
		}
		if json.Unmarshal(body, &env) != nil {
			return ""
		}
		var ids []string
		for _, e := range env.Events {
			if e.ID == "" {
				return "" // an event without one: the delivery cannot be told
			}
			ids = append(ids, e.ID)
		}
		return strings.Join(ids, ",")
	case "gitlab":
		return hdr.Get("X-Gitlab-Event-UUID")
	}
	return cmp.Or(hdr.Get("X-Gitea-Delivery"), hdr.Get("X-GitHub-Delivery"), hdr.Get("X-Gogs-Delivery"))
}

// seen reports whether a delivery was acted on in the last hour.
func (h *hooks) seen(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.handled[key]
	return ok && h.now().Sub(at) < replayWindow
}

// remember notes a delivery acted on, forgetting those past the window.
func (h *hooks) remember(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if h.handled == nil {
		h.handled = map[string]time.Time{}
	}
	if len(h.handled) >= maxHandled {
		for k, at := range h.handled {
			if now.Sub(at) >= replayWindow {
				delete(h.handled, k)
			}
		}
		if len(h.handled) >= maxHandled {
			clear(h.handled) // a flood: start over rather than grow
		}
	}
	h.handled[key] = now
}

// hookReply is what a receiver answers.
type hookReply struct {
	Triggered []string `json:"triggered"`
	Ignored   string   `json:"ignored,omitempty"`
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	kind := "unknown"
	outcome := "bad request"
	defer func() { hookRequests.WithLabelValues(kind, outcome).Inc() }()
	ns, name, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, hookPrefix), "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") || req.Method != http.MethodPost {
		http.Error(w, "POST to /hook/NAMESPACE/RECEIVER", http.StatusNotFound)
		outcome = "not found"
		return
	}
	sec, err := h.secrets.Get(req.Context(), ns, &v1alpha1.SecretRef{Name: name})
	if err != nil || sec.Labels[ReceiverLabel] != "true" || len(sec.Data[receiverKey]) == 0 {
		// The same answer for no Secret and a Secret that is no
		// receiver: the hook does not tell which Secrets exist.
		http.Error(w, "no such receiver", http.StatusNotFound)
		outcome = "not found"
		return
	}
	token := sec.Data[receiverKey]
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxHookBody))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	kind, ok = authenticate(req.Header, body, token)
	if !ok {
		http.Error(w, "signature or token does not match the receiver's", http.StatusUnauthorized)
		outcome = "unauthorized"
		h.log.Warn("webhook refused", "receiver", ns+"/"+name, "kind", kind, "from", req.RemoteAddr)
		return
	}
	// A delivery replayed (by anyone who saw it go by) is not acted on
	// again; a failed one, retried by its sender, is.
	delivery := ""
	if id := deliveryID(kind, req.Header, body); id != "" {
		delivery = ns + "/" + name + "/" + id
		if h.seen(delivery) {
			outcome = "replayed"
			h.log.Warn("webhook replayed", "receiver", ns+"/"+name, "kind", kind, "delivery", id, "from", req.RemoteAddr)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			json.NewEncoder(w).Encode(hookReply{Ignored: "delivery " + id + " was acted on already"})
			return
		}
	}
	at := h.now()
	var reply hookReply
	switch kind {
	case "registry":
		reply, err = h.registryPush(req.Context(), ns, body, at)
	default:
		reply, err = h.gitPush(req.Context(), ns, kind, req.Header, body, at)
	}
	if err != nil {
		code := http.StatusServiceUnavailable // the API server: the sender retries
		if errors.As(err, new(badRequest)) {
			code = http.StatusBadRequest
		} else {
			outcome = "failed"
			h.log.Error("webhook", "receiver", ns+"/"+name, "error", err)
		}
		http.Error(w, err.Error(), code)
		return
	}
	outcome = "accepted"
	if reply.Ignored != "" {
		outcome = "ignored"
	}
	if delivery != "" {
		h.remember(delivery)
	}
	h.log.Info("webhook", "receiver", ns+"/"+name, "kind", kind, "triggered", len(reply.Triggered), "ignored", reply.Ignored)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	json.NewEncoder(w).Encode(reply)
}

// authenticate checks a request against the receiver's token, the way
// its sender signs: GitHub and Gitea an HMAC-SHA256 of the body, Gitlab
// the token itself, a registry (or anything else) a bearer token.
func authenticate(hdr http.Header, body, token []byte) (kind string, ok bool) {
	mac := func() []byte {
		m := hmac.New(sha256.New, token)
		m.Write(body)
		return m.Sum(nil)
	}
	hexEqual := func(got string) bool {
		want := mac()
		b, err := hex.DecodeString(got)
		return err == nil && hmac.Equal(b, want)
	}
	switch {
	case hdr.Get("X-Gitlab-Event") != "" || hdr.Get("X-Gitlab-Token") != "":
		return "gitlab", subtle.ConstantTimeCompare([]byte(hdr.Get("X-Gitlab-Token")), token) == 1
	case hdr.Get("X-Gitea-Event") != "" || hdr.Get("X-Gitea-Signature") != "":
		if s := hdr.Get("X-Hub-Signature-256"); s != "" {
			return "gitea", strings.HasPrefix(s, "sha256=") && hexEqual(s[len("sha256="):])
		}
		return "gitea", hexEqual(hdr.Get("X-Gitea-Signature"))
	case hdr.Get("X-GitHub-Event") != "" || hdr.Get("X-Hub-Signature-256") != "":
		s := hdr.Get("X-Hub-Signature-256")
		return "github", strings.HasPrefix(s, "sha256=") && hexEqual(s[len("sha256="):])
	default:
		a := hdr.Get("Authorization")
		tok, found := strings.CutPrefix(a, "Bearer ")
		return "registry", found && subtle.ConstantTimeCompare([]byte(tok), token) == 1
	}
}

// gitPush triggers what reads the pushed repository.
func (h *hooks) gitPush(ctx context.Context, ns, kind string, hdr http.Header, body []byte, at time.Time) (hookReply, error) {
	event := cmp.Or(hdr.Get("X-Gitlab-Event"), hdr.Get("X-Gitea-Event"), hdr.Get("X-GitHub-Event"))
	switch event {
	case "push", "Push Hook", "Tag Push Hook", "":
	case "pull_request", "pull_request_sync", "Merge Request Hook":
		return h.pullRequest(ctx, ns, kind, event, body)
	case "ping":
		return hookReply{Ignored: "ping"}, nil
	default:
		return hookReply{Ignored: "event " + event}, nil
	}
	var p struct {
		Ref        string `json:"ref"`
		Repository struct {
			CloneURL   string `json:"clone_url"`
			SSHURL     string `json:"ssh_url"`
			HTMLURL    string `json:"html_url"`
			URL        string `json:"url"`
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
		} `json:"repository"`
		Project struct {
			GitHTTPURL string `json:"git_http_url"`
			GitSSHURL  string `json:"git_ssh_url"`
			WebURL     string `json:"web_url"`
		} `json:"project"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return hookReply{}, badRequest{fmt.Errorf("a push event: %w", err)}
	}
	r := p.Repository
	repos := nonEmpty(repository(r.CloneURL), repository(r.SSHURL), repository(r.HTMLURL), repository(r.URL), repository(r.GitHTTPURL),
		repository(r.GitSSHURL), repository(p.Project.GitHTTPURL), repository(p.Project.GitSSHURL), repository(p.Project.WebURL))
	if len(repos) == 0 {
		return hookReply{}, badRequest{errors.New("a push event names no repository")}
	}
	follows := func(ref string) bool {
		if ref == "" || p.Ref == "" {
			return true
		}
		return p.Ref == ref || p.Ref == "refs/heads/"+ref || p.Ref == "refs/tags/"+ref
	}
	var targets []client.Object
	for _, repo := range repos {
		in := []client.ListOption{client.InNamespace(ns), client.MatchingFields{indexRepo: repo}}
		var syncs v1alpha1.ManifestSyncList
		var images v1alpha1.ImageList
		var configs v1alpha1.RepoConfigList
		if err := h.client.List(ctx, &syncs, in...); err != nil {
			return hookReply{}, err
		}
		if err := h.client.List(ctx, &images, in...); err != nil {
			return hookReply{}, err
		}
		if err := h.client.List(ctx, &configs, in...); err != nil {
			return hookReply{}, err
		}
		for i := range syncs.Items {
			if follows(syncs.Items[i].Spec.Source.Ref) {
				targets = append(targets, &syncs.Items[i])
			}
		}
		for i := range images.Items {
			targets = append(targets, &images.Items[i])
		}
		for i := range configs.Items {
			if follows(configs.Items[i].Spec.Ref) {
				targets = append(targets, &configs.Items[i])
			}
		}
	}
	return h.trigger(ctx, targets, at, v1alpha1.RequestForSource)
}

// registryPush triggers the syncs following the pushed tags.
func (h *hooks) registryPush(ctx context.Context, ns string, body []byte, at time.Time) (hookReply, error) {
	var env struct {
		Events []struct {
			Action string `json:"action"`
			Target struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"target"`
			Request struct {
				Host string `json:"host"`
			} `json:"request"`
		} `json:"events"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return hookReply{}, badRequest{fmt.Errorf("registry notification: %w", err)}
	}
	var keys []string
	for _, e := range env.Events {
		if e.Action != "push" || e.Target.Repository == "" || e.Request.Host == "" {
			continue
		}
		repo := e.Request.Host + "/" + e.Target.Repository
		keys = append(keys, imageKey(repo, ""))
		if e.Target.Tag != "" {
			keys = append(keys, imageKey(repo, e.Target.Tag))
		}
	}
	keys = nonEmpty(keys...)
	if len(keys) == 0 {
		return hookReply{Ignored: "no push of a tag"}, nil
	}
	var targets []client.Object
	for _, k := range keys {
		var syncs v1alpha1.ManifestSyncList
		if err := h.client.List(ctx, &syncs, client.InNamespace(ns), client.MatchingFields{indexImage: k}); err != nil {
			return hookReply{}, err
		}
		for i := range syncs.Items {
			targets = append(targets, &syncs.Items[i])
		}
	}
	return h.trigger(ctx, targets, at, v1alpha1.RequestForImages)
}

// trigger sets the reconcile request annotation of each target (once per
// object), several at a time, saying what it is for; a target with a
// request of another kind still pending gets one for everything.
func (h *hooks) trigger(ctx context.Context, targets []client.Object, at time.Time, what string) (hookReply, error) {
	patchFor := func(what string) client.Patch {
		v := "null"
		if what != "" {
			v = strconv.Quote(what)
		}
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%s}}}`,
			v1alpha1.ReconcileRequestAnnotation, at.UTC().Format(time.RFC3339Nano), v1alpha1.ReconcileRequestForAnnotation, v))
	}
	seen := map[string]bool{}
	var reply hookReply
	if h.direct != nil {
		var syncs []*v1alpha1.ManifestSync
		var rest []client.Object
		for _, t := range targets {
			if ms, ok := t.(*v1alpha1.ManifestSync); ok {
				if id := "ManifestSync/" + ms.Name; !seen[id] {
					seen[id] = true
					syncs = append(syncs, ms)
				}
				continue
			}
			rest = append(rest, t)
		}
		if h.direct(syncs, at, what) {
			for _, ms := range syncs {
				reply.Triggered = append(reply.Triggered, "ManifestSync/"+ms.Name)
			}
			targets = rest
		} else {
			clear(seen)
		}
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, t := range targets {
		id := fmt.Sprintf("%T/%s", t, t.GetName())
		if seen[id] {
			continue
		}
		seen[id] = true
		kind := strings.TrimPrefix(fmt.Sprintf("%T", t), "*v1alpha1.")
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			patch := patchFor(what)
			if a := t.GetAnnotations(); a[v1alpha1.ReconcileRequestAnnotation] != "" && a[v1alpha1.ReconcileRequestForAnnotation] != what &&
				a[v1alpha1.ReconcileRequestAnnotation] != lastHandled(t) {
				patch = patchFor("") // another request not yet handled: both
			}
			err := h.client.Patch(ctx, t, patch)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				reply.Triggered = append(reply.Triggered, kind+"/"+t.GetName())
			case !apierrors.IsNotFound(err):
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return reply, errors.Join(errs...)
}

// lastHandled is the reconcile request a resource handled last.
func lastHandled(o client.Object) string {
	switch o := o.(type) {
	case *v1alpha1.ManifestSync:
		return o.Status.LastHandledReconcileAt
	case *v1alpha1.Image:
		return o.Status.LastHandledReconcileAt
	case *v1alpha1.RepoConfig:
		return o.Status.LastHandledReconcileAt
	}
	return ""
}

// badRequest is a payload the receiver cannot read.
type badRequest struct{ error }
