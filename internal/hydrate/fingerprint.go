package hydrate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"sluice.dev/sluice/api/v1alpha1"
)

// formatVersion changes when the rendered output of the same inputs would
// change for reasons the other fingerprinted fields do not cover.
// 2: the record marked for Argo CD and a .sourceignore beside it for Flux.
const formatVersion = 2

// fingerprint digests everything a folder's content depends on: the sync
// settings that shape the output, the renderer, what it read, the remote
// chart and the pinned digests.
func fingerprint(ms *v1alpha1.ManifestSync, renderer v1alpha1.Renderer, inputs []v1alpha1.Input, chart *v1alpha1.PinnedChart, images []v1alpha1.PinnedImage, keyID string) string {
	doc := struct {
		Format   int                    `json:"format"`
		Path     string                 `json:"path"`
		Render   *v1alpha1.Render       `json:"render"`
		Rules    []v1alpha1.ImageRule   `json:"rules"`
		Layout   string                 `json:"layout"`
		Release  string                 `json:"release"`
		Renderer v1alpha1.Renderer      `json:"renderer"`
		Inputs   []v1alpha1.Input       `json:"inputs"`
		Chart    *v1alpha1.PinnedChart  `json:"chart"`
		Images   []v1alpha1.PinnedImage `json:"images"`
		Deploy   *deployPrint           `json:"deploy,omitempty"`
	}{formatVersion, ms.Spec.Source.Path, ms.Spec.Render, ms.Spec.Images, ms.Spec.Destination.Layout, ms.Name, renderer, inputs, chart, images, deployFingerprint(ms, renderer, keyID)}
	data, _ := json.Marshal(doc) // plain data: cannot fail
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// deployPrint is what of a sync's deployer and Secrets settings shapes its
// folder.
type deployPrint struct {
	Format   int                `json:"format"`
	Deployer *v1alpha1.Deployer `json:"deployer,omitempty"`
	Secrets  string             `json:"secrets,omitempty"`
	SOPS     *v1alpha1.SOPS     `json:"sops,omitempty"`
	Key      string             `json:"key,omitempty"`
}

// deployFormat changes when what a deployer makes of the same render
// changes. 1: a chart's tests left out, its hooks arranged for the
// deployer, its generated values and Secrets as the sync key makes them.
const deployFormat = 1

// deployFingerprint is nil for a sync whose folder these settings could
// not have changed (no chart, no setting, no key used), so that its
// fingerprint, and so its folder, stays as it was before they existed.
func deployFingerprint(ms *v1alpha1.ManifestSync, renderer v1alpha1.Renderer, keyID string) *deployPrint {
	d := ms.Spec.Destination
	if renderer.Name != "helm" && ms.Spec.Deployer == nil && d.Secrets == "" && d.SOPS == nil && keyID == "" {
		return nil
	}
	return &deployPrint{Format: deployFormat, Deployer: ms.Spec.Deployer, Secrets: d.Secrets, SOPS: d.SOPS, Key: keyID}
}
