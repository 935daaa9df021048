package hydrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/ociartifact"
	"sluice.dev/sluice/internal/registry"
)

// artifact is an OCI destination as a run reads it once: what its tag
// holds, staged in a directory where the run's folders are written
// before they are packed and pushed together, as one artifact.
type artifact struct {
	tag name.Tag
	reg *registry.Client
	dir destination.Dir
	// digest is what the tag pointed at when read ("" when it did not
	// exist).
	digest string
}

// openArtifact reads the artifact an OCI destination's tag names (once
// per run, whatever number of syncs write it) and returns a reader of its
// folders. An artifact Sluice did not push reads as empty: the push
// refuses to move its tag, naming it.
func (r *runner) openArtifact(ctx context.Context, p *plan) (folderReader, error) {
	d := p.ms.Spec.Destination
	p.branch = d.Tag
	reg := r.o.registry(p.ms)
	repo, err := reg.ParseRepository(strings.TrimPrefix(d.Repo, v1alpha1.OCIScheme))
	if err != nil {
		return nil, fmt.Errorf("spec.destination.repo %q: %w", d.Repo, err)
	}
	key := fmt.Sprintf("%s:%s#%p", repo.Name(), d.Tag, reg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.artifacts[key]; ok {
		p.tip, p.artifact = a.digest, a
		return a.dir, nil
	}
	tag := repo.Tag(d.Tag)
	files, m, digest, found, err := ociartifact.Read(ctx, tag, ociartifact.DefaultLimits(), reg.Options(ctx)...)
	switch {
	case err != nil && (m == nil || ociartifact.Ours(m)):
		return nil, fmt.Errorf("reading %s%s: %w", v1alpha1.OCIScheme, tag, err)
	case err != nil || (found && !ociartifact.Ours(m)):
		files = nil // someone else's: nothing of it is kept
	}
	dir, err := os.MkdirTemp("", "sluice-oci-")
	if err != nil {
		return nil, err
	}
	r.tmpDirs = append(r.tmpDirs, dir)
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p)) // ociartifact.Files checked each path
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return nil, err
		}
	}
	a := &artifact{tag: tag, reg: reg, dir: destination.Dir{Root: dir}}
	if found {
		a.digest = digest.String()
	}
	r.artifacts[key] = a
	p.tip = a.digest
	p.artifact = a
	return a.dir, nil
}

// writeArtifact lands the changed folders of one OCI destination's tag:
// each written into the staged artifact, the whole packed and pushed,
// the tag moved once the artifact is whole (and only when it changed).
// Every sync of the tag lands, or none does.
func (r *runner) writeArtifact(ctx context.Context, plans []*plan, indexes []int) {
	a := plans[indexes[0]].artifact
	var err error
	for _, i := range indexes {
		p := plans[i]
		if err = a.dir.WriteFolder(p.dstPath, p.folder); err != nil {
			err = fmt.Errorf("staging %s: %w", p.dstPath, err)
			break
		}
	}
	var res ociartifact.PushResult
	if err == nil {
		var files map[string][]byte
		if files, err = readTree(a.dir.Root); err == nil {
			packed, perr := ociartifact.Pack(files, artifactMeta(plans, indexes))
			if err = perr; err == nil {
				o := ociartifact.PushOptions{Remote: a.reg.PushOptions(ctx)}
				if t, terr := immutableTag(a.tag.TagStr(), packed, artifactMeta(plans, indexes)); terr == nil {
					o.Tags = []string{t}
				}
				if key := r.o.ArtifactKey; key != nil {
					o.BeforeTag = func(ctx context.Context, ref name.Digest) error {
						return r.signArtifact(ctx, ref, key, plans, indexes)
					}
				}
				res, err = ociartifact.Push(ctx, a.tag, packed, o)
			}
		}
	}
	for _, i := range indexes {
		out := plans[i].result()
		switch {
		case err != nil:
			out.Err = fmt.Errorf("pushing %s%s: %w", v1alpha1.OCIScheme, a.tag, err)
		case !res.Pushed:
			out.Result, out.Commit = Unchanged, res.Digest.String()
		default:
			out.Result, out.Commit = Committed, res.Digest.String()
		}
		r.finish(i, out)
	}
}

// artifactMeta is the origin an artifact's annotations give: the source
// its syncs share (Flux shows it as the artifact's origin); none when
// they read several.
func artifactMeta(plans []*plan, indexes []int) ociartifact.Meta {
	var m ociartifact.Meta
	for n, i := range indexes {
		prov := plans[i].prov
		if prov == nil {
			return ociartifact.Meta{}
		}
		src := prov.Source
		rev := ""
		if src.Commit != "" {
			rev = src.Ref + "@sha1:" + src.Commit
			if src.Ref == "" {
				rev = "sha1:" + src.Commit
			}
		}
		if n == 0 {
			m = ociartifact.Meta{Source: src.Repo, Revision: rev}
		} else if m.Source != src.Repo || m.Revision != rev {
			return ociartifact.Meta{}
		}
	}
	return m
}

// readTree reads every file under root, by slash-separated relative path.
func readTree(root string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	return files, err
}

// signArtifact signs an artifact as cosign signs, and attaches its SLSA
// provenance: each sync of it, its source, the folder it rendered from,
// its render settings, the images it pinned and its provenance record.
func (r *runner) signArtifact(ctx context.Context, ref name.Digest, key *artifactsig.Key, plans []*plan, indexes []int) error {
	opts := plans[indexes[0]].artifact.reg.PushOptions(ctx)
	if _, err := artifactsig.SignCosign(ctx, ref, key, opts...); err != nil {
		return err
	}
	prov := artifactsig.Provenance{Version: r.o.Version, Finished: r.o.Now()}
	for _, i := range indexes {
		p := plans[i]
		sp := artifactsig.SyncProvenance{Name: p.ms.Name, Folder: p.dstPath, Record: p.folder[v1alpha1.ProvenanceFile]}
		if p.ms.Namespace != "" {
			sp.Name = p.ms.Namespace + "/" + p.ms.Name
		}
		if pv := p.prov; pv != nil {
			sp.Repo, sp.Ref, sp.Commit, sp.Paths = pv.Source.Repo, pv.Source.Ref, pv.Source.Commit, []string{pv.Source.Path}
			for _, img := range pv.Images {
				sp.Images = append(sp.Images, artifactsig.PinnedImage{Name: img.Name, Digest: img.Digest})
			}
			sp.Render = map[string]any{"deployer": pv.Deployer}
			if raw, err := json.Marshal(p.ms.Spec.Render); err == nil {
				var render map[string]any
				if json.Unmarshal(raw, &render) == nil && len(render) > 0 {
					sp.Render["render"] = render
				}
			}
		}
		prov.Syncs = append(prov.Syncs, sp)
	}
	predicate, err := prov.Predicate()
	if err != nil {
		return err
	}
	_, err = artifactsig.Attest(ctx, ref, key, artifactsig.SLSAPredicate, predicate, opts...)
	return err
}

// immutableTag is the tag of one hydration beside the moving one: the
// moving tag, the source commit when the syncs share one, and the
// content's digest (dev-1e2f3a4b5c6d-9a8b7c6d5e4f): the same name is
// never given to other content.
func immutableTag(moving string, img v1.Image, m ociartifact.Meta) (string, error) {
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		return "", fmt.Errorf("the artifact has no layer: %v", err)
	}
	content, err := layers[0].Digest()
	if err != nil {
		return "", err
	}
	t := moving
	if _, commit, ok := strings.Cut(m.Revision, "sha1:"); ok && len(commit) >= 12 {
		t += "-" + commit[:12]
	}
	return t + "-" + content.Hex[:12], nil
}
