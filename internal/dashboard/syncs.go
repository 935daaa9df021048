package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

// The states a sync is shown in, from its spec and conditions.
const (
	StateReady       = "Ready"
	StateFailed      = "Failed"
	StateStalled     = "Stalled"
	StateLocked      = "Locked"
	StateReview      = "InReview"
	StateProgressing = "Progressing"
	StateSuspended   = "Suspended"
	StateUnknown     = "Unknown"
)

var states = []string{StateReady, StateFailed, StateStalled, StateLocked, StateReview, StateProgressing, StateSuspended, StateUnknown}

// syncRow is what a table row (and a sync's page) shows of a sync.
type syncRow struct {
	Namespace, Name string
	State           string
	Message         string
	Source          commitRef
	Destination     commitRef
	Branch, Path    string
	Images          []v1alpha1.PinnedImage
	Lock            *v1alpha1.Takeover
	PullRequest     *v1alpha1.PullRequestStatus
	// Changed is when the Ready condition last changed.
	Changed   time.Time
	LastError string
	Interval  string
	Sync      *v1alpha1.ManifestSync
}

// commitRef is a repository at a commit, with a web link where the git
// host's web URL is known.
type commitRef struct {
	Repo, Commit, Ref, Path string
	URL                     string
	// Signed says how the commit is signed: the trusted key that signed a
	// verified source, the Secret whose key signs the destination's.
	Signed string
}

func rowOf(ms *v1alpha1.ManifestSync) syncRow {
	r := syncRow{Namespace: ms.Namespace, Name: ms.Name, Sync: ms, LastError: ms.Status.LastError}
	r.State, r.Message = stateOf(ms)
	if c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		r.Changed = c.LastTransitionTime.Time
	}
	r.Source = commitRef{Repo: ms.Spec.Source.Repo, Ref: ms.Spec.Source.Ref, Path: ms.Spec.Source.Path}
	if src := ms.Status.Source; src != nil {
		r.Source.Commit = src.Commit
		if src.SignedBy != "" {
			r.Source.Signed = "verified: signed by " + src.SignedBy
		}
	}
	r.Source.URL = commitURL(r.Source.Repo, r.Source.Commit)
	dest := ms.Spec.Destination
	r.Destination = commitRef{Repo: dest.Repo, Ref: dest.Target(), Path: dest.Path}
	if d := ms.Status.Destination; d != nil {
		r.Destination = commitRef{Repo: d.Repo, Ref: cmp.Or(d.Branch, d.Tag), Path: d.Path, Commit: cmp.Or(d.Commit, d.Digest)}
	}
	if r.Destination.Repo == "" {
		r.Destination.Repo = r.Source.Repo
	}
	if sg := dest.Signing; sg != nil {
		r.Destination.Signed = signedWith(sg, dest.IsOCI())
	}
	r.Destination.URL = commitURL(r.Destination.Repo, r.Destination.Commit)
	r.Images = ms.Status.Images
	r.Lock = ms.Status.Lock
	r.PullRequest = ms.Status.PullRequest
	if ms.Spec.Interval != nil {
		r.Interval = ms.Spec.Interval.Duration.String()
	}
	return r
}

// stateOf reads a sync's state as kstatus would, with Sluice's reasons.
func stateOf(ms *v1alpha1.ManifestSync) (string, string) {
	ready := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	msg := ""
	if ready != nil {
		msg = ready.Message
	}
	switch {
	case ms.Spec.Suspend:
		return StateSuspended, msg
	case meta.IsStatusConditionTrue(ms.Status.Conditions, v1alpha1.ConditionStalled):
		return StateStalled, meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionStalled).Message
	case meta.IsStatusConditionTrue(ms.Status.Conditions, v1alpha1.ConditionReconciling):
		return StateProgressing, msg
	case ready == nil:
		return StateUnknown, msg
	case ready.Status == metav1.ConditionTrue:
		return StateReady, msg
	case ready.Reason == v1alpha1.ReasonLocked:
		return StateLocked, msg
	case ready.Reason == v1alpha1.ReasonPullRequestOpen:
		return StateReview, msg
	case ready.Status == metav1.ConditionFalse:
		return StateFailed, msg
	}
	return StateUnknown, msg
}

// commitURL is a commit's page on the git host, for the hosts whose web
// URLs follow the clone URL: GitHub, GitLab, Gitea and Forgejo. Clone URLs
// with credentials, or not over https, get none.
func commitURL(repo, commit string) string {
	u, err := url.Parse(repo)
	if err != nil || commit == "" || u.User != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return ""
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return ""
	}
	base := strings.TrimSuffix(strings.TrimSuffix(u.String(), "/"), ".git")
	if strings.Contains(u.Hostname(), "gitlab") {
		return base + "/-/commit/" + commit
	}
	return base + "/commit/" + commit
}

func isLoopback(host string) bool {
	return host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1"
}

// filter is what the syncs table is narrowed to, from the page's query.
type filter struct {
	Namespace   string
	Label       string
	State       string
	Destination string
	Query       string
	Page        int
	selector    labels.Selector
	Err         string
}

func filterOf(q url.Values) filter {
	f := filter{
		Namespace: strings.TrimSpace(q.Get("namespace")), Label: strings.TrimSpace(q.Get("label")),
		State: q.Get("state"), Destination: strings.TrimSpace(q.Get("destination")), Query: strings.TrimSpace(q.Get("q")),
	}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	if f.Page < 1 {
		f.Page = 1
	}
	if !slices.Contains(states, f.State) {
		f.State = ""
	}
	f.selector = labels.Everything()
	if f.Label != "" {
		sel, err := labels.Parse(f.Label)
		if err != nil {
			f.Err = fmt.Sprintf("label selector %q: %v", f.Label, err)
		} else {
			f.selector = sel
		}
	}
	return f
}

func (f filter) matches(r syncRow) bool {
	if f.State != "" && r.State != f.State {
		return false
	}
	if f.Query != "" && !strings.Contains(r.Name, f.Query) {
		return false
	}
	if f.Destination != "" {
		d := r.Destination.Repo + " " + r.Destination.Ref + " " + r.Destination.Path
		if !strings.Contains(d, f.Destination) {
			return false
		}
	}
	return true
}

// query is the filter as a query string, for links to other pages.
func (f filter) query(page int) string {
	v := url.Values{}
	for k, s := range map[string]string{"namespace": f.Namespace, "label": f.Label, "state": f.State, "destination": f.Destination, "q": f.Query} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

type syncsPage struct {
	Title      string
	Nav        string
	Filter     filter
	States     []string
	Namespaces []string
	Rows       []syncRow
	Total      int // syncs matching the filter
	All        int // syncs in view
	Counts     map[string]int
	Page       int
	Pages      int
	First      int
	Last       int
	Prev, Next string
	Err        string
}

func (s *Server) syncs(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r.URL.Query())
	p := syncsPage{Title: "Syncs", Nav: "syncs", Filter: f, States: states, Err: f.Err, Counts: map[string]int{}}
	var list v1alpha1.ManifestSyncList
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: f.selector}}
	if ns := cmp.Or(f.Namespace, s.o.Namespace); ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := s.reader.List(r.Context(), &list, opts...); err != nil {
		p.Err = listError(err)
	}
	// A person sees the namespaces they may list syncs in.
	visible, err := s.visible(r.Context(), cmp.Or(f.Namespace, s.o.Namespace))
	if err != nil {
		p.Err = actionError(err)
	}
	var all v1alpha1.ManifestSyncList
	if err := s.reader.List(r.Context(), &all, client.InNamespace(s.o.Namespace)); err == nil {
		seen := map[string]bool{}
		for i := range all.Items {
			ns := all.Items[i].Namespace
			if !visible(ns) {
				continue
			}
			p.All++
			if !seen[ns] {
				seen[ns] = true
				p.Namespaces = append(p.Namespaces, ns)
			}
		}
		slices.Sort(p.Namespaces)
	}
	rows := make([]syncRow, 0, len(list.Items))
	for i := range list.Items {
		if !visible(list.Items[i].Namespace) {
			continue
		}
		row := rowOf(&list.Items[i])
		p.Counts[row.State]++
		if f.matches(row) {
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b syncRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	p.Total = len(rows)
	p.Pages = max(1, (len(rows)+s.o.PageSize-1)/s.o.PageSize)
	p.Page = min(f.Page, p.Pages)
	from := (p.Page - 1) * s.o.PageSize
	to := min(from+s.o.PageSize, len(rows))
	p.Rows = rows[from:to]
	p.First, p.Last = from+1, to
	if p.Page > 1 {
		p.Prev = "/syncs" + f.query(p.Page-1)
	}
	if p.Page < p.Pages {
		p.Next = "/syncs" + f.query(p.Page+1)
	}
	s.render(w, r, "syncs.html", p)
}

type syncPage struct {
	Title string
	Nav   string
	Path  string
	Row   syncRow
	Err   string
}

func (s *Server) sync(w http.ResponseWriter, r *http.Request) {
	ms, ok := s.syncOf(w, r, "sync.html")
	if !ok {
		return
	}
	s.render(w, r, "sync.html", syncPage{Title: ms.Namespace + "/" + ms.Name, Nav: "syncs", Path: "/syncs/" + ms.Namespace + "/" + ms.Name, Row: rowOf(ms)})
}

func listError(err error) string {
	if apierrors.IsForbidden(err) {
		return "Forbidden: " + err.Error()
	}
	return err.Error()
}

var funcs = template.FuncMap{
	"short": func(s string) string {
		s = strings.TrimPrefix(s, "sha256:")
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := time.Since(t)
		switch {
		case d < time.Minute:
			return fmt.Sprintf("%ds ago", int(d.Seconds()))
		case d < time.Hour:
			return fmt.Sprintf("%dm ago", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%dh ago", int(d.Hours()))
		}
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	},
	"rfc3339": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"symbol": func(state string) string {
		switch state {
		case StateReady:
			return "✓"
		case StateFailed, StateStalled:
			return "✗"
		case StateLocked:
			return "◆"
		case StateReview:
			return "◔"
		case StateProgressing:
			return "…"
		case StateSuspended:
			return "‖"
		}
		return "?"
	},
	"lower": strings.ToLower,
	"chain": chain,
	"sessionSymbol": func(state string) string {
		switch state {
		case "active":
			return "●"
		case "stale":
			return "✗"
		case "restoring":
			return "↺"
		}
		return "?"
	},
	"stopForm": func(name, csrf string) map[string]string { return map[string]string{"Name": name, "CSRF": csrf} },
}

// signedWith says how a destination is signed, naming no secret value.
func signedWith(sg *v1alpha1.Signing, oci bool) string {
	switch {
	case !oci && sg.SecretRef != nil:
		return "commits signed with the key of Secret " + sg.SecretRef.Name
	case sg.Provider == v1alpha1.SigningNotation && sg.SecretRef != nil:
		return "artifacts signed by Notation with the certificate of Secret " + sg.SecretRef.Name
	case sg.Keyless != nil:
		return "artifacts signed by cosign, keyless, through " + cmp.Or(sg.Keyless.FulcioURL, v1alpha1.DefaultFulcioURL)
	case sg.SecretRef != nil:
		return "artifacts signed by cosign with the key of Secret " + sg.SecretRef.Name
	}
	return ""
}
