// Package preview runs the engines for one ManifestSync resource of a
// cluster at a person's request, as the dashboard needs: what its next
// hydration would change (a dry run of the very engine the controller
// commits with), what its folder's provenance says, which destination
// commits touched the folder; and the two things a person does to a
// takeover's lock, release and extend (the only writes).
package preview

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-containerregistry/pkg/authn"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/credentials"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/hydrate"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/source"
)

// Previewer previews syncs through one clone cache.
type Previewer struct {
	// Hydrate are the engines' options every preview starts from: Cache
	// (required: a controller's shares its clones), Registry (required:
	// for a sync that names no registry Secret), Limits, Egress, and how
	// renders run. A sync's own credentials are added to them.
	Hydrate hydrate.Options
	// RegistryFor, if set, makes the client of a sync's registry Secret
	// (a controller's, under its rate limits); the default is a plain
	// client of the Secret's keychain.
	RegistryFor func(kc authn.Keychain, identity string) (*registry.Client, *render.Charts)
	// AllowLocal lets syncs read repositories on this machine's disk (a
	// person's dashboard; never a controller's).
	AllowLocal bool
	// OwnCredentials gives a sync that names no git Secret the Cache's
	// own credentials (a person's, on a laptop); otherwise it reads
	// anonymously.
	OwnCredentials bool
}

// Plan is the dry run of a sync's next hydration: its Result carries the
// unified diff of the folder (empty when nothing would change).
func (p *Previewer) Plan(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync) (hydrate.Result, error) {
	ms, o, err := p.options(ctx, secrets, obj)
	if err != nil {
		return hydrate.Result{}, err
	}
	o.DryRun = true
	rep, err := hydrate.Run(ctx, []config.ManifestSync{ms}, o)
	if err != nil {
		return hydrate.Result{}, err
	}
	r := rep.Results[0]
	return r, r.Err
}

// options are the hydration options of one sync: its Secrets' credentials,
// read through secrets.
func (p *Previewer) options(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync) (config.ManifestSync, hydrate.Options, error) {
	ms, err := config.FromManifestSync(obj, p.AllowLocal)
	if err != nil {
		return ms, hydrate.Options{}, fmt.Errorf("ManifestSync %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	s := credentials.NewSecrets(secrets)
	src, dst, err := p.gitCredentials(ctx, s, obj)
	if err != nil {
		return ms, hydrate.Options{}, err
	}
	o := p.Hydrate
	o.Parallel = 1
	o.Credentials = func(config.ManifestSync) (*source.Credentials, *source.Credentials) { return src, dst }
	if ref := obj.Spec.RegistrySecretRef; ref != nil {
		kc, id, err := s.Registry(ctx, obj.Namespace, ref)
		if err != nil {
			return ms, o, err
		}
		if p.RegistryFor != nil {
			o.Registry, o.Charts = p.RegistryFor(kc, id)
		} else {
			o.Registry = registry.New(registry.WithKeychain(kc))
		}
	}
	return ms, o, nil
}

// Folder is what the destination says of a sync's folder.
type Folder struct {
	// Branch and Commit are the destination branch and its tip as read.
	Branch, Commit string
	// Provenance is the folder's record; nil when the folder has none.
	Provenance *v1alpha1.Provenance
	// History are the newest commits of the branch that changed the
	// folder, newest first.
	History []source.LogEntry
}

// Folder reads a sync's folder and its history (at most max commits, of
// the last 1,000 of the branch).
func (p *Previewer) Folder(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync, max int) (*Folder, error) {
	ms, repo, err := p.destination(ctx, secrets, obj)
	if err != nil {
		return nil, err
	}
	d := ms.Spec.Destination
	name := d.Branch
	if d.Mode == v1alpha1.ModeBranch {
		name = d.ReviewBranch(ms.Name)
	}
	b, err := destination.Open(repo, name)
	if err != nil {
		return nil, err
	}
	f := &Folder{Branch: name}
	if !b.Exists() {
		return f, nil
	}
	f.Commit = b.Tip().String()
	folder := strings.Trim(path.Clean(d.Path), "/")
	if f.Provenance, err = hydrate.ReadProvenance(b, folder); err != nil {
		return f, err
	}
	if f.History, err = repo.History(plumbing.NewHash(f.Commit), folder, max, 1000); err != nil {
		return f, fmt.Errorf("reading the history of %s: %w", folder, err)
	}
	return f, nil
}

// gitCredentials are a sync's credentials for its source and destination,
// from the Secrets it names, read as whoever secrets reads as.
func (p *Previewer) gitCredentials(ctx context.Context, s *credentials.Secrets, obj *v1alpha1.ManifestSync) (src, dst *source.Credentials, err error) {
	spec := obj.Spec
	if p.OwnCredentials && spec.Source.SecretRef == nil && spec.Destination.SecretRef == nil {
		return nil, nil, nil // the cache's own
	}
	if src, err = s.Git(ctx, obj.Namespace, spec.Source.SecretRef); err != nil {
		return nil, nil, err
	}
	if dst, err = s.Git(ctx, obj.Namespace, spec.DestinationSecretRef()); err != nil {
		return nil, nil, err
	}
	return src, dst, nil
}

// Branch is the recent history of a destination branch, as it concerns
// some syncs' folders.
type Branch struct {
	Name, Commit string
	// History are the newest commits that changed any of the folders,
	// each naming those it changed.
	History []source.LogEntry
}

// BranchHistory reads the newest max commits of the destination branch
// obj writes that changed any of folders (of the last 1,000), with obj's
// credentials.
func (p *Previewer) BranchHistory(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync, folders []string, max int) (*Branch, error) {
	ms, repo, err := p.destination(ctx, secrets, obj)
	if err != nil {
		return nil, err
	}
	d := ms.Spec.Destination
	b, err := destination.Open(repo, d.Branch)
	if err != nil {
		return nil, err
	}
	out := &Branch{Name: d.Branch}
	if !b.Exists() {
		return out, nil
	}
	out.Commit = b.Tip().String()
	out.History, err = repo.BranchHistory(b.Tip(), folders, max, 1000)
	return out, err
}

// destination opens the repository a sync writes, with its credentials.
func (p *Previewer) destination(ctx context.Context, secrets client.Reader, obj *v1alpha1.ManifestSync) (config.ManifestSync, *source.Repo, error) {
	ms, err := config.FromManifestSync(obj, p.AllowLocal)
	if err != nil {
		return ms, nil, fmt.Errorf("ManifestSync %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	_, dst, err := p.gitCredentials(ctx, credentials.NewSecrets(secrets), obj)
	if err != nil {
		return ms, nil, err
	}
	d := ms.Spec.Destination
	loc, err := source.ParseLocation(d.Repo, ms.Origin.Dir)
	if err != nil {
		return ms, nil, fmt.Errorf("spec.destination.repo: %w", err)
	}
	repo, err := p.Hydrate.Cache.Open(ctx, loc, source.OpenOptions{Credentials: dst})
	if err != nil {
		return ms, nil, fmt.Errorf("opening destination %s: %w", source.Redact(d.Repo), err)
	}
	return ms, repo, nil
}
