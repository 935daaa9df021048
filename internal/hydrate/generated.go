package hydrate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	goyaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/hooks"
	"sluice.dev/sluice/internal/mask"
	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/secrets"
)

// maxGeneratedErrors bounds the objects a refusal names.
const maxGeneratedErrors = 10

// refuseGenerated fails a sync one of whose objects holds, anywhere but
// in a Secret's data or stringData values, a value its chart generated
// from the sync key (values): committed, it would be readable in git, and
// a preview would show it. Each object is named with its field and
// template, never the value. A test hook left out is not committed and
// not looked at; spec.render.helm.generatedValuesOutsideSecrets lets
// them through.
func refuseGenerated(ms config.ManifestSync, objs []*yaml.RNode, values *mask.Set) error {
	if values.Empty() {
		return nil
	}
	helmTests := ms.Spec.Deployer != nil && ms.Spec.Deployer.HelmTests
	if r := ms.Spec.Render; r != nil && r.Helm != nil && r.Helm.GeneratedValuesOutsideSecrets {
		return nil
	}
	var errs []error
	for _, o := range objs {
		if hooks.LeftOut(o, helmTests) {
			continue
		}
		// One look at the whole object first: most hold no value.
		if _, ok := values.Find(scalars(o)); !ok {
			continue
		}
		field, v, ok := generatedIn(o, values)
		if !ok {
			continue
		}
		from := ""
		if src := render.Source(o); src != "" {
			from = " (from " + src + ")"
		}
		errs = append(errs, fmt.Errorf("%s%s: %s holds a value the chart generated from the sync key (%s)", objectRef(o), from, field, v.Origin))
		if len(errs) == maxGeneratedErrors {
			errs = append(errs, errors.New("(and maybe more)"))
			break
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w\na value generated from the sync key is committed only in a Secret's data or stringData, encrypted: move it there, or set spec.render.helm.generatedValuesOutsideSecrets to commit it readable", errors.Join(errs...))
}

// generatedIn finds the first field of o holding a value of values:
// keys, values and comments, a Secret's data and stringData values
// aside (they are encrypted; their keys are not).
func generatedIn(o *yaml.RNode, values *mask.Set) (string, mask.Value, bool) {
	// A Secret's values are encrypted, unless it says it is already
	// (then they must be ciphertext, which a generated value is not).
	secret := secrets.IsSecret(o) && o.Field("sops") == nil
	var walk func(n *goyaml.Node, path string, data bool) (string, mask.Value, bool)
	check := func(text, path string) (string, mask.Value, bool) {
		if text == "" {
			return "", mask.Value{}, false
		}
		v, ok := values.Find(text)
		return path, v, ok
	}
	walk = func(n *goyaml.Node, path string, data bool) (string, mask.Value, bool) {
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			if f, v, ok := check(c, path+" (a comment)"); ok {
				return f, v, ok
			}
		}
		switch n.Kind {
		case goyaml.ScalarNode:
			if data {
				return "", mask.Value{}, false
			}
			return check(n.Value, path)
		case goyaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if f, v, ok := walk(k, p+" (its key)", false); ok {
					return f, v, ok
				}
				if f, v, ok := walk(n.Content[i+1], p, data || secret && path == "" && (k.Value == "data" || k.Value == "stringData")); ok {
					return f, v, ok
				}
			}
		case goyaml.SequenceNode, goyaml.DocumentNode:
			for i, c := range n.Content {
				if f, v, ok := walk(c, path+"["+strconv.Itoa(i)+"]", data); ok {
					return f, v, ok
				}
			}
		}
		return "", mask.Value{}, false
	}
	f, v, ok := walk(o.YNode(), "", false)
	return strings.TrimPrefix(f, "."), v, ok
}

// scalars are the text generatedIn looks at in o, one line each (a
// value is never found across two).
func scalars(o *yaml.RNode) string {
	secret := secrets.IsSecret(o) && o.Field("sops") == nil
	var b strings.Builder
	var walk func(n *goyaml.Node, top, data bool)
	walk = func(n *goyaml.Node, top, data bool) {
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			if c != "" {
				b.WriteString(c)
				b.WriteByte('\n')
			}
		}
		switch n.Kind {
		case goyaml.ScalarNode:
			if !data {
				b.WriteString(n.Value)
				b.WriteByte('\n')
			}
		case goyaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i], false, false)
				k := n.Content[i].Value
				walk(n.Content[i+1], false, data || secret && top && (k == "data" || k == "stringData"))
			}
		case goyaml.SequenceNode, goyaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, false, data)
			}
		}
	}
	walk(o.YNode(), true, false)
	return b.String()
}

// objectRef names an object as errors do: Kind/namespace/name.
func objectRef(o *yaml.RNode) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + "/" + ns + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetName()
}
