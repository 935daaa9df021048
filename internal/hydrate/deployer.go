package hydrate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
	"sluice.dev/sluice/internal/hooks"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/secrets"
)

// DefaultSyncKeyMissing says how the command line passes the sync key.
const DefaultSyncKeyMissing = "the values this sync's chart generates, and its encrypted Secrets, must be the same at every hydration, which takes the sync key: " +
	"pass it with --sync-key FILE or $SLUICE_SYNC_KEY, as a signing key is passed (make one once with `sluice sync-key new > FILE`, and keep it secret); a hydration without it never makes values at random"

// syncKey is the sync's own key, derived from the run's; nil without one.
func (r *runner) syncKey(ms config.ManifestSync) []byte {
	if r.o.SyncKey.IsZero() {
		return nil
	}
	return r.o.SyncKey.For(ms.Namespace, ms.Name, ms.Annotations[v1alpha1.RotateGeneratedAnnotation])
}

// keyMissing says how to pass the sync key.
func (r *runner) keyMissing() string {
	if r.o.SyncKeyMissing != "" {
		return r.o.SyncKeyMissing
	}
	return DefaultSyncKeyMissing
}

// generate is what a sync's render makes generated values from.
func (r *runner) generate(ms config.ManifestSync) *render.Generate {
	return &render.Generate{Key: r.syncKey(ms), Now: r.o.SyncKey.Created}
}

// keyID identifies the sync key a folder's generated values and Secret
// digests were made with, in the fingerprint: a rotated key (or rotation
// annotation) renders them anew. It is a digest of the key, which says
// nothing of it, and empty for a folder that used no key, so that a sync
// that needs none hydrates the same with and without one.
func keyID(key []byte, used bool) string {
	if !used || len(key) == 0 {
		return ""
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("sluice key id"))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// usedKey reports whether a folder's content depended on the sync key.
func usedKey(p *v1alpha1.Provenance) bool {
	if len(p.Generated) > 0 {
		return true
	}
	for _, s := range p.Secrets {
		if s.Committed == v1alpha1.SecretEncrypted {
			return true
		}
	}
	return false
}

// deployed is what the deployer's side of a hydration found.
type deployed struct {
	hooks    []v1alpha1.Hook
	warnings []string
	secrets  []v1alpha1.SecretRecord
	// keys say what became of each key of each Secret encrypted.
	keys map[string]map[string]secrets.KeyChange
}

// forDeployer makes the rendered, pinned objects into the folder the
// sync's deployer applies: its Secrets encrypted (or left out), a chart's
// tests left out and its hooks in their phases.
func (r *runner) forDeployer(ctx context.Context, p *plan, res *render.Result, objs []*yaml.RNode, current folderReader) (destination.Folder, *deployed, error) {
	ms := p.ms
	d := &deployed{}
	tool := ms.Spec.DeployerTool()
	if err := r.refuseUnkeyed(ms, res, objs); err != nil {
		return nil, nil, err
	}
	so := secrets.Options{
		Policy: ms.Spec.Destination.Secrets, Recipients: ms.Spec.Destination.SOPS, Tool: tool,
		Key: r.syncKey(ms), KeyMissing: r.keyMissing(), Origins: render.Source,
	}
	if p.prev != nil {
		so.Records = p.prev.Secrets
		if usedKey(&v1alpha1.Provenance{Secrets: p.prev.Secrets}) {
			prev, err := encryptedSecrets(current, p.dstPath)
			if err != nil {
				return nil, nil, err
			}
			so.Previous = prev
		}
	}
	sealed, err := secrets.Seal(ctx, objs, so)
	if err != nil {
		return nil, nil, err
	}
	d.secrets, d.keys = sealed.Records, sealed.Keys
	layout := &hooks.Layout{Objects: sealed.Objects}
	if res.Renderer.Name == render.Helm {
		dep := ms.Spec.Deployer
		ho := hooks.Options{Tool: tool, Name: ms.Name, Path: p.dstPath, Decrypt: sealed.Encrypted > 0 || hasEncrypted(sealed.Records)}
		if dep != nil {
			ho.HelmTests, ho.Flux = dep.HelmTests, dep.Flux
		}
		if layout, err = hooks.Arrange(sealed.Objects, ho); err != nil {
			return nil, nil, err
		}
		d.hooks, d.warnings = layout.Hooks, layout.Warnings
		if dep != nil && dep.UnsupportedHooks == v1alpha1.HooksRefuse && len(layout.Warnings) > 0 {
			return nil, nil, fmt.Errorf("%s cannot run %d of the chart's hooks as Helm does, and spec.deployer.unsupportedHooks is refuse:\n  %s",
				hooks.ToolName(tool), len(layout.Warnings), strings.Join(layout.Warnings, "\n  "))
		}
	}
	layoutName := ms.Spec.Destination.Layout
	folder, err := destination.Manifests(layout.Objects, layoutName)
	if err != nil {
		return nil, nil, err
	}
	for _, ph := range layout.Phases {
		sub, err := destination.Manifests(ph.Objects, layoutName)
		if err != nil {
			return nil, nil, fmt.Errorf("phase %s: %w", ph.Dir, err)
		}
		for name, data := range sub {
			folder[ph.Dir+"/"+name] = data
		}
	}
	for name, data := range layout.Files {
		folder[name] = data
	}
	return folder, d, nil
}

func hasEncrypted(records []v1alpha1.SecretRecord) bool {
	for _, r := range records {
		if r.Committed == v1alpha1.SecretEncrypted || r.Committed == v1alpha1.SecretAsIs {
			return true
		}
	}
	return false
}

// encryptedSecrets reads the SOPS-encrypted Secrets a folder holds, by
// namespace/name.
func encryptedSecrets(current folderReader, dir string) (map[string]*yaml.RNode, error) {
	files, err := current.ReadFolder(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*yaml.RNode{}
	for name, data := range files {
		if !strings.HasSuffix(name, ".yaml") || !strings.Contains(string(data), "sops:") {
			continue
		}
		objs, err := kio.FromBytes(data)
		if err != nil {
			continue // not ours to judge here: the render replaces it
		}
		for _, o := range objs {
			if secrets.IsSecret(o) && o.Field("sops") != nil {
				out[o.GetNamespace()+"/"+o.GetName()] = o
			}
		}
	}
	return out, nil
}

// refuseUnkeyed fails a sync one of whose objects holds values a template
// generated at random, without the sync key: committed, they would change
// at every hydration. Values only a test hook left out holds need no key.
func (r *runner) refuseUnkeyed(ms config.ManifestSync, res *render.Result, objs []*yaml.RNode) error {
	if len(res.Unkeyed) == 0 {
		return nil
	}
	helmTests := ms.Spec.Deployer != nil && ms.Spec.Deployer.HelmTests
	if o, src := hooks.Unkeyed(objs, res.Unkeyed, helmTests); o != nil {
		fns := ""
		for _, g := range res.Generated {
			if g.Template == src {
				fns = strings.Join(g.Functions, ", ")
			}
		}
		return fmt.Errorf("%s/%s/%s holds values its template %s generates (%s): %s", o.GetKind(), o.GetNamespace(), o.GetName(), src, fns, r.keyMissing())
	}
	return nil
}
