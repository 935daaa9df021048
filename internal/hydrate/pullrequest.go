package hydrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/forge"
	"sluice.dev/sluice/internal/sandbox"
	"sluice.dev/sluice/internal/signing"
)

// isProposal says a sync proposes its changes by pull request.
func isProposal(p *plan) bool {
	return p.ms.Spec.Destination.Mode == v1alpha1.ModePullRequest
}

// The default title and body of a pull request.
const (
	defaultTitle = `Hydrate {{.Branch}}: {{range $i, $s := .Syncs}}{{if $i}}, {{end}}{{$s.Name}}{{end}}`
	defaultBody  = `Sluice proposes the rendered manifests below for {{.Branch}}.
{{range .Syncs}}
- **{{.Name}}** into ` + "`{{.Path}}`" + `{{with .Source}}, from {{.}}{{end}}{{range .Images}}
  - image ` + "`{{.Name}}:{{.Tag}}@{{.Digest}}`" + `{{end}}{{end}}

{{.Stat}}

Sluice keeps this pull request current: a later change updates it, a moved {{.Branch}} rebases it, and it is closed when nothing is left to propose.
`
)

// prData is what the title and body templates are given.
type prData struct {
	Branch string
	Syncs  []prSync
	Stat   string
}

type prSync struct {
	Name, Source, Path string
	Images             []v1alpha1.PinnedImage
}

// propose lands the syncs of one base branch in pullRequest mode as one
// pull request: their changed folders (and those an earlier proposal
// holds) on the proposal branch, rebased on the base, the pull request
// opened, updated or closed to match.
func (r *runner) propose(ctx context.Context, plans []*plan, indexes []int) {
	first := plans[indexes[0]]
	d := first.ms.Spec.Destination
	base, head := d.Branch, d.PullRequestBranch()
	var changes []destination.Change
	var changed, members []*plan
	b, err := destination.Open(first.dstRepo, base)
	if err != nil {
		for _, i := range indexes {
			out := plans[i].result()
			out.Err = err
			r.finish(i, out)
		}
		return
	}
	for _, i := range indexes {
		p := plans[i]
		members = append(members, p)
		if p.folder != nil {
			changes = append(changes, destination.Change{Path: p.dstPath, Files: p.folder})
			changed = append(changed, p)
			continue
		}
		// The base holds what it renders: whatever an earlier proposal
		// held for it is withdrawn.
		c := destination.Change{Path: p.dstPath}
		if h, ok, err := b.TreeHash(p.dstPath); err == nil && ok {
			c.Tree = plumbing.NewHash(h)
		}
		changes = append(changes, c)
	}
	msg := "rebase the proposal for " + base
	if len(changed) > 0 {
		msg = commitMessage(changed)
	}
	var status *v1alpha1.PullRequestStatus
	var prop destination.Proposal
	f, pr, err := r.forge(ctx, first)
	if err == nil {
		// What head holds waits for review only while its pull request
		// is open; otherwise the proposal starts from the base again.
		fresh := pr == nil || pr.State != v1alpha1.PullRequestOpen
		var signer signing.Signer
		if signer, err = r.o.signer(members); err == nil {
			prop, err = destination.Propose(ctx, first.dstRepo, base, head, changes, destination.WriteOptions{Message: msg, Author: r.o.Author, Signer: signer, Fresh: fresh})
		}
	}
	if err == nil {
		status, err = r.pullRequest(ctx, f, pr, first, members, prop)
	}
	if err == nil && prop.Empty && !prop.Left.IsZero() {
		// Nothing left to propose, its pull request closed or merged: the
		// proposal branch goes too.
		err = first.dstRepo.DeleteBranch(ctx, head, prop.Left)
	}
	for _, i := range indexes {
		p := plans[i]
		out := p.result()
		out.Branch, out.PullRequest = head, status
		switch {
		case err != nil:
			out.Err = fmt.Errorf("proposing to %s: %w", base, err)
		case prop.Empty:
			// The base holds it all: that is where the folder is.
			out.Commit, out.Branch = prop.Base.String(), base
			out.Destination = strings.Replace(out.Destination, " "+head+" ", " "+base+" ", 1)
		default:
			out.Commit = prop.Commit.String()
			if prop.Changed && p.folder != nil {
				out.Result = Committed
			} else {
				out.Result = Unchanged
			}
		}
		r.finish(i, out)
	}
}

// forge is the forge of a sync's destination, and the newest pull request
// from its proposal branch.
func (r *runner) forge(ctx context.Context, first *plan) (forge.Forge, *forge.PullRequest, error) {
	d := first.ms.Spec.Destination
	kind := ""
	if d.PullRequest != nil {
		kind = d.PullRequest.Forge
	}
	user, password := first.dstRepo.APICredentials()
	f, err := forge.For(kind, first.dstRepo.Location().URL, forge.Credentials{Username: user, Password: password})
	if err != nil {
		return nil, nil, err
	}
	pr, err := f.Find(ctx, d.PullRequestBranch(), d.Branch)
	return f, pr, err
}

// pullRequest makes the forge's pull request match the proposal, and
// says how it stands.
func (r *runner) pullRequest(ctx context.Context, f forge.Forge, pr *forge.PullRequest, first *plan, members []*plan, prop destination.Proposal) (*v1alpha1.PullRequestStatus, error) {
	d := first.ms.Spec.Destination
	spec := d.PullRequest
	if spec == nil {
		spec = &v1alpha1.PullRequest{}
	}
	base, head := d.Branch, d.PullRequestBranch()
	switch {
	case prop.Empty:
		if pr != nil && pr.State == v1alpha1.PullRequestOpen {
			if err := f.Close(ctx, pr.Number); err != nil {
				return nil, fmt.Errorf("closing #%d, whose change %s already holds: %w", pr.Number, base, err)
			}
			pr.State = v1alpha1.PullRequestClosed
		}
	default:
		title, body, err := r.describe(ctx, spec, base, members, prop)
		if err != nil {
			return nil, err
		}
		if pr == nil || pr.State != v1alpha1.PullRequestOpen {
			pr, err = f.Open(ctx, forge.New{Head: head, Base: base, Title: title, Body: body, Labels: spec.Labels, Reviewers: spec.Reviewers, Draft: spec.Draft, AutoMerge: spec.AutoMerge})
			if err != nil && pr == nil {
				return nil, err
			}
		} else {
			if spec.Draft {
				title = pr.Title // a draft's title is the forge's mark: a person may lift it
			}
			if pr.Title != title || pr.Body != body {
				if err := f.Edit(ctx, pr.Number, title, body); err != nil {
					return nil, fmt.Errorf("updating #%d: %w", pr.Number, err)
				}
				pr.Title, pr.Body = title, body
			}
		}
		if err != nil {
			return status(pr, head, prop), err
		}
	}
	if pr == nil {
		return nil, nil
	}
	return status(pr, head, prop), nil
}

func status(pr *forge.PullRequest, head string, prop destination.Proposal) *v1alpha1.PullRequestStatus {
	s := &v1alpha1.PullRequestStatus{URL: pr.URL, Number: pr.Number, State: pr.State, Branch: head, MergeCommit: pr.MergeCommit}
	if !prop.Commit.IsZero() {
		s.Commit = prop.Commit.String()
	}
	return s
}

// Bounds of a pull request's title and body, as the forges take them.
const (
	maxTitle = 1 << 10
	maxBody  = 64 << 10
)

// describe renders the title and body templates: Sluice's own here, a
// sync's in a worker process where the run has a sandbox (a template is
// code: bounded in output, time and memory there).
func (r *runner) describe(ctx context.Context, spec *v1alpha1.PullRequest, base string, members []*plan, prop destination.Proposal) (string, string, error) {
	data := prData{Branch: base}
	var stat strings.Builder
	for _, f := range prop.Folders {
		fmt.Fprintf(&stat, "- `%s`: %d added, %d changed, %d removed\n", f.Path, f.Added, f.Changed, f.Removed)
		i := slices.IndexFunc(members, func(p *plan) bool { return p.dstPath == f.Path })
		if i < 0 {
			data.Syncs = append(data.Syncs, prSync{Name: f.Path, Path: f.Path}) // proposed earlier, or removed
			continue
		}
		p := members[i]
		s := prSync{Name: p.ms.Name, Path: p.dstPath}
		if p.prov != nil {
			s.Source, s.Images = sourceLine(p.prov.Source), p.prov.Images
		}
		data.Syncs = append(data.Syncs, s)
	}
	data.Stat = strings.TrimSuffix(stat.String(), "\n")
	title, err := r.execute(ctx, "title", spec.Title, defaultTitle, data, maxTitle)
	if err != nil {
		return "", "", err
	}
	body, err := r.execute(ctx, "body", spec.Body, defaultBody, data, maxBody)
	return strings.TrimSpace(strings.SplitN(title, "\n", 2)[0]), body, err
}

// execute renders one template: the sync's (text), or Sluice's own.
func (r *runner) execute(ctx context.Context, name, text, own string, data prData, max int) (string, error) {
	var out string
	var err error
	switch {
	case text == "":
		out, err = sandbox.ExecuteTemplate(name, own, data, max)
	case r.o.Sandbox != nil:
		out, err = r.o.Sandbox.Template(ctx, name, text, data, max)
	default:
		out, err = sandbox.ExecuteTemplate(name, text, data, max)
	}
	if err != nil {
		return "", fmt.Errorf("pullRequest.%s: %w", name, err)
	}
	return out, nil
}

// Withdraw proposes, through the branch's pull request, the removal of a
// sync's folder (the sync was deleted with spec.prune): in pullRequest
// mode that too waits for review.
func Withdraw(ctx context.Context, ms config.ManifestSync, o Options) (*v1alpha1.PullRequestStatus, error) {
	d := ms.Spec.Destination
	repo, err := openDestinationRepo(ctx, ms, o)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o}
	first := &plan{ms: ms, dstRepo: repo, dstPath: d.Path}
	f, pr, err := r.forge(ctx, first)
	if err != nil {
		return nil, err
	}
	prop, err := destination.Propose(ctx, repo, d.Branch, d.PullRequestBranch(), []destination.Change{{Path: d.Path}}, destination.WriteOptions{
		Message: fmt.Sprintf("remove %s (ManifestSync %s deleted, spec.prune)", d.Path, ms.Name), Author: o.Author, Signer: o.signerOf(ms),
		Fresh: pr == nil || pr.State != v1alpha1.PullRequestOpen,
	})
	if err != nil {
		return nil, err
	}
	status, err := r.pullRequest(ctx, f, pr, first, nil, prop)
	if err == nil && prop.Empty && !prop.Left.IsZero() {
		err = repo.DeleteBranch(ctx, d.PullRequestBranch(), prop.Left)
	}
	return status, err
}
