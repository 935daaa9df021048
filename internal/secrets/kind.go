package secrets

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Is reports whether apiVersion and kind name a core Secret as the API
// server reads them: "v1" and "/v1" are both the core group's v1.
func Is(apiVersion, kind string) bool {
	if kind != "Secret" {
		return false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == "" && gv.Version == "v1"
}

// IsSecret reports whether o is a Secret, its apiVersion and kind read as
// a YAML decoder reads them (a "!!binary U2VjcmV0" kind is "Secret" to
// whatever applies it).
func IsSecret(o *yaml.RNode) bool {
	return Is(Scalar(o, "apiVersion"), Scalar(o, "kind"))
}

// Scalar is the value of o's top-level field as a YAML decoder reads it
// (its tag applied), "" when o has none.
func Scalar(o *yaml.RNode, field string) string {
	f := o.Field(field)
	if f == nil || f.Value == nil || f.Value.YNode().Kind != yaml.ScalarNode {
		return ""
	}
	n := f.Value.YNode()
	var s string
	if n.Tag == "" || n.Tag == "!!str" || n.Decode(&s) != nil {
		return n.Value
	}
	return s
}

// Values are a Secret's values by "data.KEY" and "stringData.KEY", as
// written (a data value in base64).
func Values(o *yaml.RNode) map[string]string {
	out := map[string]string{}
	for _, field := range []string{"data", "stringData"} {
		m := o.Field(field)
		if m == nil || m.Value == nil || m.Value.YNode().Kind != yaml.MappingNode {
			continue
		}
		c := m.Value.YNode().Content
		for i := 0; i+1 < len(c); i += 2 {
			out[field+"."+c[i].Value] = c[i+1].Value
		}
	}
	return out
}
