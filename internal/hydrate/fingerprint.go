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
func fingerprint(ms *v1alpha1.ManifestSync, renderer v1alpha1.Renderer, inputs []v1alpha1.Input, chart *v1alpha1.PinnedChart, images []v1alpha1.PinnedImage) string {
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
	}{formatVersion, ms.Spec.Source.Path, ms.Spec.Render, ms.Spec.Images, ms.Spec.Destination.Layout, ms.Name, renderer, inputs, chart, images}
	data, _ := json.Marshal(doc) // plain data: cannot fail
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
