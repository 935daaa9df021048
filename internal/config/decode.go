package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// fieldError is a problem with one field of one document.
type fieldError struct {
	Field string
	Line  int
	Msg   string
}

// decoder converts a YAML node tree into a Go value the way encoding/json
// would with DisallowUnknownFields, but keeps the line of every field so
// that errors point into the file.
type decoder struct {
	errs  []fieldError
	lines map[string]int
}

func newDecoder() *decoder { return &decoder{lines: map[string]int{}} }

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, fieldError{Field: path, Line: n.Line, Msg: fmt.Sprintf(format, args...)})
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode || n.Kind == yaml.DocumentNode {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else if len(n.Content) == 1 {
			n = n.Content[0]
		} else {
			return
		}
	}
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = n.Line
	}
	if isNull(n) {
		return
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(jsonUnmarshaler) {
		d.decodeJSON(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.fail(path, n, "expected a string, got %s%s", describe(n), quoteHint(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, ok := scalarBool(n)
		if !ok {
			d.fail(path, n, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil || v.OverflowInt(i) {
			d.fail(path, n, "expected an integer, got %s", describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.fail(path, n, "%v", err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		d.fail(path, n, "cannot decode into %s", v.Type())
	}
}

func (d *decoder) decodeJSON(n *yaml.Node, v reflect.Value, path string) {
	var x any
	if err := n.Decode(&x); err != nil {
		d.fail(path, n, "%v", err)
		return
	}
	raw, err := json.Marshal(jsonable(x))
	if err != nil {
		d.fail(path, n, "%v", err)
		return
	}
	if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
		d.fail(path, n, "%v", err)
	}
}

// jsonable turns the map[string]any / []any trees yaml.v3 produces into
// ones encoding/json accepts (it refuses map[any]any keys).
func jsonable(x any) any {
	switch t := x.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonable(e)
		}
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonable(e)
		}
	}
	return x
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "expected a mapping, got %s", describe(n))
		return
	}
	fields := structFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		fp := join(path, key)
		if seen[key] {
			d.fail(fp, k, "duplicate field")
			continue
		}
		seen[key] = true
		idx, ok := fields[key]
		if !ok {
			d.fail(fp, k, "unknown field%s", suggest(key, fields))
			continue
		}
		d.lines[fp] = k.Line
		d.decode(val, v.FieldByIndex(idx), fp)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "expected a mapping, got %s", describe(n))
		return
	}
	if v.Type().Key().Kind() != reflect.String {
		d.fail(path, n, "cannot decode into %s", v.Type())
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		fp := path + "[" + k.Value + "]"
		if v.MapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key())).IsValid() {
			d.fail(fp, k, "duplicate key")
			continue
		}
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(val, e, fp)
		v.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
	}
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		d.decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
	}
	v.Set(s)
}

// fieldsOf caches structFields per type: a run decodes the same few
// types hundreds of times.
var fieldsOf sync.Map // reflect.Type -> map[string][]int

// structFields maps json names to field indexes, descending into inline
// (embedded or `json:",inline"`) structs.
func structFields(t reflect.Type) map[string][]int {
	if m, ok := fieldsOf.Load(t); ok {
		return m.(map[string][]int)
	}
	m := computeFields(t)
	fieldsOf.Store(t, m)
	return m
}

func computeFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, idx := range computeFields(ft) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = []int{i}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func scalarBool(n *yaml.Node) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, false
	}
	return b, true
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int":
		return "the number " + n.Value
	case "!!float":
		return "the number " + n.Value
	case "!!bool":
		return n.Value
	case "!!str":
		return strconv.Quote(n.Value)
	}
	return strconv.Quote(n.Value)
}

func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf(" (quote it: %q)", n.Value)
	}
	return ""
}

// suggest names the known field closest to a misspelt one.
func suggest(key string, fields map[string][]int) string {
	best, bestD := "", 3
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if d := distance(strings.ToLower(key), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return "; known fields: " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
