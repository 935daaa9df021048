package testenv

import (
	"encoding/json"
	"fmt"
)

// Fields flattens a decoded JSON or YAML value into its scalar fields,
// each under a path such as ".spec.containers[0].image", its value
// JSON-encoded, so that two objects compare field by field.
func Fields(v any) map[string]string {
	out := map[string]string{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(p+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", p, i), e)
			}
		default:
			data, _ := json.Marshal(x)
			out[p] = string(data)
		}
	}
	walk("", v)
	return out
}
