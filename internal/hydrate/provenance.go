package hydrate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
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
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// plain turns JSON's flow style and quoting into block YAML.
func plain(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		// Let the encoder quote only what needs quoting.
		n.Style = 0
	}
	for _, c := range n.Content {
		plain(c)
	}
}

// parseProvenance reads a record written by marshalProvenance.
func parseProvenance(data []byte) (*v1alpha1.Provenance, error) {
	var p v1alpha1.Provenance
	if err := sigsyaml.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	if p.Kind != v1alpha1.KindProvenance {
		return nil, fmt.Errorf("not a Provenance record")
	}
	return &p, nil
}
