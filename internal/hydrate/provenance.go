package hydrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"go.yaml.in/yaml/v3"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/destination"
)

// marshalProvenance writes the record as block YAML with fields in the
// order the type declares them, so it reads top-down: what, from where, by
// what, with which images, from which files.
func marshalProvenance(p *v1alpha1.Provenance) ([]byte, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, err
	}
	plain(&n)
	var b bytes.Buffer
	b.WriteString("# Written by Sluice: what this folder was rendered from. Do not edit.\n")
	// Not an object to apply: Argo CD skips a file holding this marker.
	b.WriteString("# +argocd:skip-file-rendering\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// plain turns JSON's flow style and quoting into block YAML.
func plain(n *yaml.Node) {
	n.Style = 0 // the encoder quotes only what needs quoting
	for _, c := range n.Content {
		plain(c)
	}
}

// provenanceHead is the part of a record that deciding whether a sync
// changed needs. Decoding it straight from YAML skips the settings (whose
// Helm values need the JSON round trip) and is several times faster, which
// matters when a run checks hundreds of folders and renders none.
type provenanceHead struct {
	Kind        string                    `yaml:"kind"`
	Sync        string                    `yaml:"sync"`
	Source      v1alpha1.ProvenanceSource `yaml:"source"`
	Renderer    v1alpha1.Renderer         `yaml:"renderer"`
	Images      []v1alpha1.PinnedImage    `yaml:"images"`
	Waiting     []string                  `yaml:"waiting"`
	Inputs      []v1alpha1.Input          `yaml:"inputs"`
	Trees       []v1alpha1.Input          `yaml:"trees"`
	Chart       *v1alpha1.PinnedChart     `yaml:"chart"`
	Fingerprint string                    `yaml:"fingerprint"`
	Manifests   string                    `yaml:"manifests"`
	Takeover    *v1alpha1.Takeover        `yaml:"takeover"`
	Deployer    string                    `yaml:"deployer"`
	Generated   []v1alpha1.Generated      `yaml:"generated"`
	Lookups     []string                  `yaml:"lookups"`
	Secrets     []v1alpha1.SecretRecord   `yaml:"secrets"`
	Warnings    []string                  `yaml:"warnings"`
}

// parseProvenance reads the head of a record written by
// marshalProvenance; its Render and Rules are left empty.
func parseProvenance(data []byte) (*v1alpha1.Provenance, error) {
	var h provenanceHead
	if err := yaml.Unmarshal(data, &h); err != nil {
		return nil, err
	}
	if h.Kind != v1alpha1.KindProvenance {
		return nil, fmt.Errorf("not a Provenance record")
	}
	return &v1alpha1.Provenance{
		APIVersion: v1alpha1.APIVersion, Kind: h.Kind, Sync: h.Sync, Source: h.Source, Renderer: h.Renderer,
		Images: h.Images, Waiting: h.Waiting, Inputs: h.Inputs, Trees: h.Trees, Chart: h.Chart, Fingerprint: h.Fingerprint, Manifests: h.Manifests,
		Takeover: h.Takeover, Deployer: h.Deployer, Generated: h.Generated, Lookups: h.Lookups, Secrets: h.Secrets, Warnings: h.Warnings,
	}, nil
}

// ReadProvenance reads the provenance record of a folder of a branch; nil
// when the folder has none.
func ReadProvenance(b *destination.Branch, folder string) (*v1alpha1.Provenance, error) {
	data, ok, err := b.ReadFile(path.Join(folder, v1alpha1.ProvenanceFile))
	if err != nil || !ok {
		return nil, err
	}
	p, err := parseProvenance(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(folder, v1alpha1.ProvenanceFile), err)
	}
	return p, nil
}
