package preview

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/review"
	"sluice.dev/sluice/internal/source"
)

// PullRequestDiffLimit is how much of each folder's diff a pull request's
// page keeps: far more than a comment, still bounded.
const PullRequestDiffLimit = 1 << 20

// PullRequest previews a source pull request for syncs (all reading
// ch.Repo), each with its own Secrets read through secrets: the whole
// preview the comment on the pull request is cut from. The change is
// always taken as untrusted (a page cannot tell a fork's from a branch's):
// generated values derive from a throwaway key, and nothing is decrypted.
// Syncs naming different registry Secrets are previewed in groups, into
// one report.
func (p *Previewer) PullRequest(ctx context.Context, secrets client.Reader, syncs []*v1alpha1.ManifestSync, ch review.Change) (*review.Report, error) {
	type group struct {
		o     hydrate.Options
		syncs []config.ManifestSync
		creds map[string][2]*source.Credentials
	}
	groups := map[string]*group{}
	var order []string
	for _, obj := range syncs {
		ms, o, err := p.options(ctx, secrets, obj)
		if err != nil {
			return nil, err
		}
		key := ""
		if ref := obj.Spec.RegistrySecretRef; ref != nil {
			key = ref.Name
		}
		g := groups[key]
		if g == nil {
			g = &group{o: o, creds: map[string][2]*source.Credentials{}}
			groups[key], order = g, append(order, key)
		}
		src, dst := o.Credentials(ms)
		g.syncs = append(g.syncs, ms)
		g.creds[ms.Namespace+"/"+ms.Name] = [2]*source.Credentials{src, dst}
	}
	var out *review.Report
	for _, key := range order {
		g := groups[key]
		o := g.o
		o.Credentials = func(ms config.ManifestSync) (*source.Credentials, *source.Credentials) {
			c := g.creds[ms.Namespace+"/"+ms.Name]
			return c[0], c[1]
		}
		rep, err := review.Run(ctx, g.syncs, ch, review.Options{Hydrate: o, Untrusted: true, DiffLimit: PullRequestDiffLimit})
		if err != nil {
			return out, fmt.Errorf("previewing %s: %w", source.Redact(ch.Repo), err)
		}
		if out == nil {
			out = rep
			continue
		}
		out.Syncs = append(out.Syncs, rep.Syncs...)
		out.Notes = append(out.Notes, rep.Notes...)
		out.Following += rep.Following
	}
	return out, nil
}
