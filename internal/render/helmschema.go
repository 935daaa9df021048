package render

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// schemaURL is where helm places a chart's values.schema.json, so that
// references and messages read as helm's do.
const schemaURL = "file:///values.schema.json"

// validateSchemas checks values against the chart's values.schema.json and
// each subchart's against its own, as helm does, with one difference: a
// schema is only ever compared with what the chart holds. helm resolves a
// $ref to a file of the machine's disk (file:///etc/...) or fetches it over
// the network; Sluice, rendering other people's charts unattended, refuses
// both and names the reference.
func validateSchemas(ch *chart.Chart, values common.Values) error {
	var sb strings.Builder
	if ch.Schema != nil {
		if err := validateSchema(values, ch.Schema); err != nil {
			fmt.Fprintf(&sb, "%s:\n%s", ch.Name(), err.Error())
		}
	}
	for _, sub := range ch.Dependencies() {
		raw, ok := values[sub.Name()]
		if !ok || raw == nil {
			continue
		}
		subValues, ok := raw.(map[string]any)
		if !ok {
			fmt.Fprintf(&sb, "%s:\ninvalid type for values: expected object (map), got %T\n", sub.Name(), raw)
			continue
		}
		if err := validateSchemas(sub, subValues); err != nil {
			sb.WriteString(err.Error())
		}
	}
	if sb.Len() > 0 {
		return errors.New(sb.String())
	}
	return nil
}

func validateSchema(values common.Values, schemaJSON []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unable to validate schema: %v", r)
		}
	}()
	schema, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(schemaLoader{})
	if err := c.AddResource(schemaURL, schema); err != nil {
		return err
	}
	v, err := c.Compile(schemaURL)
	if err != nil {
		return err
	}
	if err := v.Validate(values.AsMap()); err != nil {
		msg := strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+schemaURL+"#'\n")
		return errors.New(msg + "\n")
	}
	return nil
}

// schemaLoader resolves the references a schema makes to other documents:
// urn: ones are taken as permissive, as helm does; nothing is read from
// the disk or the network.
type schemaLoader struct{}

func (schemaLoader) Load(u string) (any, error) {
	if strings.HasPrefix(u, "urn:") {
		return jsonschema.UnmarshalJSON(strings.NewReader("true"))
	}
	shown := u
	if p, err := url.Parse(u); err == nil && p.Scheme == "file" {
		shown = strings.TrimPrefix(p.Path, "/")
	}
	return nil, fmt.Errorf("values.schema.json refers to %s: Sluice reads no schema from outside the chart (helm would read it from this machine's disk or the network); inline it into values.schema.json", shown)
}
