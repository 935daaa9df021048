package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/dashboard"
	"sluice.dev/sluice/internal/forge"
	"sluice.dev/sluice/internal/review"
	"sluice.dev/sluice/internal/source"
)

// pullRequestEvent is a forge's word that a source pull request opened
// or moved: what a preview needs of it.
type pullRequestEvent struct {
	Forge  string // v1alpha1.Forge*
	Number int
	Base   string // the branch it merges into
	// Ref is the ref the forge keeps for its head (a fork's too), and
	// Head the commit it says the head is at.
	Ref, Head string
	// Fork says the head is in another repository: untrusted.
	Fork  bool
	Repos []string // the base repository, as index keys
	// Action is the forge's, for the log.
	Action string
}

// parsePullRequest reads a pull request event; ignored says why one asks
// for no preview (closed, labelled, edited).
func parsePullRequest(kind, event string, body []byte) (ev pullRequestEvent, ignored string, err error) {
	switch kind {
	case "gitlab":
		var p struct {
			ObjectKind string `json:"object_kind"`
			Attrs      struct {
				IID             int    `json:"iid"`
				Action          string `json:"action"`
				TargetBranch    string `json:"target_branch"`
				SourceProjectID int64  `json:"source_project_id"`
				TargetProjectID int64  `json:"target_project_id"`
				OldRev          string `json:"oldrev"`
				LastCommit      struct {
					ID string `json:"id"`
				} `json:"last_commit"`
			} `json:"object_attributes"`
			Project struct {
				GitHTTPURL string `json:"git_http_url"`
				GitSSHURL  string `json:"git_ssh_url"`
				WebURL     string `json:"web_url"`
			} `json:"project"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return ev, "", badRequest{fmt.Errorf("a merge request event: %w", err)}
		}
		a := p.Attrs
		ev = pullRequestEvent{Forge: v1alpha1.ForgeGitLab, Number: a.IID, Base: a.TargetBranch, Ref: fmt.Sprintf("refs/merge-requests/%d/head", a.IID),
			Head: a.LastCommit.ID, Fork: a.SourceProjectID != a.TargetProjectID, Action: a.Action,
			Repos: nonEmpty(repository(p.Project.GitHTTPURL), repository(p.Project.GitSSHURL), repository(p.Project.WebURL))}
		switch {
		case a.Action == "open" || a.Action == "reopen":
		case a.Action == "update" && a.OldRev != "": // new commits, not an edit
		default:
			return ev, "merge request action " + cmp.Or(a.Action, "none"), nil
		}
	default: // GitHub's and Gitea's
		var p struct {
			Action      string `json:"action"`
			Number      int    `json:"number"`
			PullRequest struct {
				Number int `json:"number"`
				Head   struct {
					SHA  string `json:"sha"`
					Repo struct {
						FullName string `json:"full_name"`
					} `json:"repo"`
				} `json:"head"`
				Base struct {
					Ref  string `json:"ref"`
					Repo struct {
						FullName string `json:"full_name"`
						CloneURL string `json:"clone_url"`
						HTMLURL  string `json:"html_url"`
						SSHURL   string `json:"ssh_url"`
					} `json:"repo"`
				} `json:"base"`
			} `json:"pull_request"`
			Repository struct {
				CloneURL string `json:"clone_url"`
				HTMLURL  string `json:"html_url"`
				SSHURL   string `json:"ssh_url"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return ev, "", badRequest{fmt.Errorf("a pull request event: %w", err)}
		}
		pr := p.PullRequest
		forge := v1alpha1.ForgeGitHub
		if kind == "gitea" {
			forge = v1alpha1.ForgeGitea
		}
		number := cmp.Or(pr.Number, p.Number)
		ev = pullRequestEvent{Forge: forge, Number: number, Base: pr.Base.Ref, Ref: fmt.Sprintf("refs/pull/%d/head", number), Head: pr.Head.SHA,
			Fork: pr.Head.Repo.FullName != pr.Base.Repo.FullName, Action: p.Action,
			Repos: nonEmpty(repository(pr.Base.Repo.CloneURL), repository(pr.Base.Repo.HTMLURL), repository(pr.Base.Repo.SSHURL),
				repository(p.Repository.CloneURL), repository(p.Repository.HTMLURL), repository(p.Repository.SSHURL))}
		switch p.Action {
		case "opened", "reopened", "synchronize", "synchronized", "ready_for_review":
		default:
			return ev, "pull request action " + cmp.Or(p.Action, "none"), nil
		}
	}
	if ev.Number <= 0 || ev.Base == "" || len(ev.Repos) == 0 {
		return ev, "", badRequest{fmt.Errorf("a %s event names no pull request, base branch or repository", event)}
	}
	return ev, "", nil
}

// pullRequest queues the preview of a source pull request for the syncs
// of the receiver's namespace that follow its base.
func (h *hooks) pullRequest(ctx context.Context, ns, kind, event string, body []byte) (hookReply, error) {
	ev, ignored, err := parsePullRequest(kind, event, body)
	if err != nil || ignored != "" {
		return hookReply{Ignored: ignored}, err
	}
	if h.preview == nil {
		return hookReply{Ignored: "previews of pull requests are off"}, nil
	}
	var syncs []*v1alpha1.ManifestSync
	seen := map[string]bool{}
	for _, repo := range ev.Repos {
		var list v1alpha1.ManifestSyncList
		if err := h.client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexRepo: repo}); err != nil {
			return hookReply{}, err
		}
		for i := range list.Items {
			ms := &list.Items[i]
			if ms.Spec.Source.Follows(ev.Base) && !seen[ms.Name] {
				seen[ms.Name] = true
				syncs = append(syncs, ms)
			}
		}
	}
	if len(syncs) == 0 {
		return hookReply{Ignored: fmt.Sprintf("no ManifestSync of %s follows %s", ns, ev.Base)}, nil
	}
	h.preview(ns, ev, syncs)
	return hookReply{Triggered: []string{fmt.Sprintf("preview of pull request %d at %s", ev.Number, short(ev.Head))}}, nil
}

// previews runs the previews webhooks ask for, in the background: one at
// a time per pull request, a newer head replacing one still waiting.
type previews struct {
	ctx context.Context
	log *slog.Logger
	// dashboard is the dashboard's URL, to link to its page of the pull
	// request ("" links nowhere).
	dashboard string
	mu        sync.Mutex
	running   map[string]bool
	waiting   map[string]previewJob
	// limited are the forges (by host) holding requests back, and until
	// when: a preview for one waits that out rather than ask again.
	limited map[string]time.Time
	wg      sync.WaitGroup
}

type previewJob struct {
	msr   *ManifestSyncReconciler
	ns    string
	ev    pullRequestEvent
	syncs []*v1alpha1.ManifestSync
	at    time.Time
}

// queue starts the preview, or leaves it for when the one running for
// the same pull request ends.
func (p *previews) queue(msr *ManifestSyncReconciler, ns string, ev pullRequestEvent, syncs []*v1alpha1.ManifestSync) {
	key := fmt.Sprintf("%s/%s/%d", ns, ev.Repos[0], ev.Number)
	j := previewJob{msr: msr, ns: ns, ev: ev, syncs: syncs, at: time.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[key] {
		p.waiting[key] = j
		return
	}
	p.running[key] = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			p.run(j)
			p.mu.Lock()
			next, ok := p.waiting[key]
			delete(p.waiting, key)
			if !ok {
				delete(p.running, key)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			j = next
		}
	}()
}

// commentLimits are the forges' comment limits.
var commentLimits = map[string]int{v1alpha1.ForgeGitHub: review.GitHubLimit, v1alpha1.ForgeGitLab: review.GitLabLimit, v1alpha1.ForgeGitea: review.GiteaLimit}

// run previews one pull request and posts the result on it.
func (p *previews) run(j previewJob) {
	start := time.Now()
	log := p.log.With("namespace", j.ns, "pullRequest", j.ev.Number, "head", short(j.ev.Head), "forge", j.ev.Forge)
	var jobs []*job
	for _, obj := range j.syncs {
		ms, err := j.msr.toConfig(obj)
		if err != nil {
			log.Warn("preview: a sync is invalid", "manifestsync", obj.Name, "error", err)
			continue
		}
		js := &job{ms: ms}
		if _, err := j.msr.credentials(p.ctx, obj, js); err != nil {
			log.Warn("preview: a sync's Secrets", "manifestsync", obj.Name, "error", err)
			continue
		}
		jobs = append(jobs, js)
	}
	if len(jobs) == 0 {
		return
	}
	syncs := make([]config.ManifestSync, len(jobs))
	for i, js := range jobs {
		syncs[i] = js.ms
	}
	o := j.msr.batch.options(jobs)
	repo, _, _ := strings.Cut(syncs[0].Spec.Source.Repo, "?")
	format := review.Format{Limit: commentLimits[j.ev.Forge],
		More: fmt.Sprintf("The whole preview: `sluice preview -f SYNCS --base %s --head %s`.", j.ev.Base, j.ev.Ref)}
	target := ""
	if p.dashboard != "" {
		target = p.dashboard + dashboard.PullPath(j.ns, repo, j.ev.Base, j.ev.Ref, j.ev.Head, j.ev.Number)
		format.More = fmt.Sprintf("The whole preview: [the dashboard's page](%s), or `sluice preview -f SYNCS --base %s --head %s`.", target, j.ev.Base, j.ev.Ref)
	}
	host := source.HostOf(repo)
	p.mu.Lock()
	until := p.limited[host]
	p.mu.Unlock()
	if wait := time.Until(until); wait > 0 {
		log.Warn("preview: the forge's rate limit holds requests back: the preview waits", "until", until, "host", host)
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return
		}
	}
	// What the remotes hold since the event: the head it names, the base
	// as it is now.
	ctx := source.ContextWithNotBefore(p.ctx, j.at)
	rep, err := review.Run(ctx, syncs, review.Change{Repo: repo, Base: j.ev.Base, Head: j.ev.Ref, HeadCommit: j.ev.Head},
		review.Options{Hydrate: o, Untrusted: j.ev.Fork, DiffLimit: 2 * format.Limit, Post: &review.Post{Forge: j.ev.Forge, Number: j.ev.Number, Format: format, TargetURL: target}})
	// From the webhook, waits included: what the pull request's author
	// waits for.
	previewDuration.Observe(time.Since(j.at).Seconds())
	var limited *forge.RateLimitedError
	if errors.As(err, &limited) {
		p.mu.Lock()
		p.limited[host] = limited.Until
		p.mu.Unlock()
	}
	if err != nil {
		log.Error("preview", "error", err)
		return
	}
	changed, failed := rep.Counts()
	log.Info("preview", "reached", len(rep.Syncs), "following", rep.Following, "changed", changed, "failed", failed,
		"unmergeable", rep.Unmergeable != "", "elapsed", time.Since(start), "sinceWebhook", time.Since(j.at))
}
