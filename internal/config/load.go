package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/anchors"
)

// Origin is where a resource was read from.
type Origin struct {
	// File is the path as given (or found under a directory given).
	File string
	// Line is the line of the document's first key.
	Line int
	// Dir is the absolute directory of File: the base of relative paths.
	Dir string
	// Repo is the repository a RepoConfig found the resource in
	// (REPO@COMMIT); empty for the person's own files. Such a resource
	// names only remote repositories, and runs no command here unless
	// AllowBuilders.
	Repo string
	// AllowBuilders lets a found Image run its builder (the RepoConfig
	// that found it allows it).
	AllowBuilders bool
	// lines maps field paths to lines, for errors found after loading.
	lines map[string]int
}

// LineOf returns the line of a field path such as "spec.destination.path",
// or of its closest parent that the file has.
func (o Origin) LineOf(path string) int {
	for p := path; p != ""; {
		if l, ok := o.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return o.Line
}

// Has reports whether the file sets a field ("spec.destination.repo"),
// rather than leaving it to its default.
func (o Origin) Has(path string) bool {
	_, ok := o.lines[path]
	return ok
}

// ManifestSync is a ManifestSync with the place it was read from.
type ManifestSync struct {
	*v1alpha1.ManifestSync
	Origin Origin
}

// RunConfig is a RunConfig with the place it was read from.
type RunConfig struct {
	*v1alpha1.RunConfig
	Origin Origin
}

// Image is an Image with the place it was read from.
type Image struct {
	*v1alpha1.Image
	Origin Origin
}

// RepoConfig is a RepoConfig with the place it was read from.
type RepoConfig struct {
	*v1alpha1.RepoConfig
	Origin Origin
}

// Set is every Sluice resource found in some files.
type Set struct {
	ManifestSyncs []ManifestSync
	RunConfigs    []RunConfig
	Images        []Image
	RepoConfigs   []RepoConfig
}

// add appends the resources of o.
func (s *Set) add(o *Set) {
	s.ManifestSyncs = append(s.ManifestSyncs, o.ManifestSyncs...)
	s.RunConfigs = append(s.RunConfigs, o.RunConfigs...)
	s.Images = append(s.Images, o.Images...)
	s.RepoConfigs = append(s.RepoConfigs, o.RepoConfigs...)
}

// Error is one problem in one resource, printed as
// FILE:LINE: KIND NAME: FIELD: MESSAGE.
type Error struct {
	File  string
	Line  int
	Kind  string
	Name  string
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	if e.Kind != "" {
		b.WriteString(e.Kind)
		if e.Name != "" {
			b.WriteString(" " + e.Name)
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// resource is what every loadable kind implements.
type resource interface {
	Default()
	Validate() field.ErrorList
	GetName() string
}

// kinds maps the sluice.dev/v1alpha1 kinds config reads to constructors.
var kinds = map[string]func() resource{
	v1alpha1.KindManifestSync: func() resource { return &v1alpha1.ManifestSync{} },
	v1alpha1.KindRunConfig:    func() resource { return &v1alpha1.RunConfig{} },
	v1alpha1.KindImage:        func() resource { return &v1alpha1.Image{} },
	v1alpha1.KindRepoConfig:   func() resource { return &v1alpha1.RepoConfig{} },
}

// Load reads every Sluice resource in the given files and directories
// (recursively: *.yaml, *.yml, *.json; hidden entries skipped). Documents of
// other API groups are ignored. All errors of all files are returned
// together, joined; a Set is returned only when there are none.
func Load(paths ...string) (*Set, error) {
	var files []string
	var errs []error
	for _, p := range paths {
		found, err := yamlFiles(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, found...)
	}
	// Files parse in parallel, on a few workers (a goroutine per file
	// would grow a fresh stack for every file's decoding); results keep
	// the files' order.
	parts := make([]*Set, len(files))
	perr := make([]error, len(files))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(files)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				data, err := readFile(files[i])
				if err != nil {
					perr[i] = err
					continue
				}
				parts[i], perr[i] = Parse(files[i], data)
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	set := &Set{}
	for i := range files {
		if perr[i] != nil {
			errs = append(errs, perr[i])
		}
		if parts[i] != nil {
			set.add(parts[i])
		}
	}
	if err := set.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// MaxFile bounds a file of Sluice resources: they are small, and a
// directory given with -f (or a RepoConfig's glob) may match anything.
const MaxFile = 8 << 20

// readFile reads a file of resources, refusing one past MaxFile.
func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFile {
		return nil, &Error{File: name, Msg: fmt.Sprintf("larger than %d MiB: not a file of Sluice resources (move it out of the directory given with -f)", MaxFile>>20)}
	}
	return data, nil
}

func yamlFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != p && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				out = append(out, path)
			}
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Parse reads the Sluice resources of one file's content. It returns the
// resources that are valid together with the errors of the others.
func Parse(file string, data []byte) (*Set, error) {
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return nil, err
	}
	set := &Set{}
	// Decoding follows aliases: bound them before anything expands one.
	if err := anchors.Check(data, 0); err != nil {
		var ae *anchors.Error
		line := 0
		if errors.As(err, &ae) {
			line = ae.Line
		}
		return nil, &Error{File: file, Line: line, Msg: err.Error()}
	}
	var errs []error
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if err == io.EOF {
				break
			}
			if !bytes.Contains(data, []byte(v1alpha1.Group+"/")) {
				break // not YAML, and not ours either (a Helm template, say)
			}
			errs = append(errs, &Error{File: file, Line: yamlErrorLine(err), Msg: yamlErrorMsg(err)})
			break
		}
		obj, err := parseDoc(file, dir, &doc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch o := obj.(type) {
		case ManifestSync:
			set.ManifestSyncs = append(set.ManifestSyncs, o)
		case RunConfig:
			set.RunConfigs = append(set.RunConfigs, o)
		case Image:
			set.Images = append(set.Images, o)
		case RepoConfig:
			set.RepoConfigs = append(set.RepoConfigs, o)
		}
	}
	return set, errors.Join(errs...)
}

func parseDoc(file, dir string, doc *yaml.Node) (any, error) {
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		if isNull(root) {
			return nil, nil
		}
		return nil, &Error{File: file, Line: root.Line, Msg: "expected a resource (a mapping with apiVersion and kind), got " + describe(root)}
	}
	apiVersion, kind, name := scalar(root, "apiVersion"), scalar(root, "kind"), ""
	if md := child(root, "metadata"); md != nil {
		name = scalar(md, "name")
	}
	group, _, _ := strings.Cut(apiVersion, "/")
	if group != v1alpha1.Group {
		return nil, nil // another tool's resource: not ours to judge
	}
	origin := Origin{File: file, Line: root.Line, Dir: dir}
	fail := func(fieldPath string, line int, msg string) error {
		return &Error{File: file, Line: line, Kind: kind, Name: name, Field: fieldPath, Msg: msg}
	}
	if apiVersion != v1alpha1.APIVersion {
		return nil, fail("apiVersion", lineOf(root, "apiVersion"), fmt.Sprintf("unsupported version %q (this Sluice reads %s)", apiVersion, v1alpha1.APIVersion))
	}
	newObj, ok := kinds[kind]
	if !ok {
		known := make([]string, 0, len(kinds))
		for k := range kinds {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fail("kind", lineOf(root, "kind"), fmt.Sprintf("unknown kind %q (known: %s)", kind, strings.Join(known, ", ")))
	}
	obj := newObj()
	d := newDecoder()
	d.decode(root, reflect.ValueOf(obj), "")
	origin.lines = d.lines
	var errs []error
	for _, fe := range d.errs {
		errs = append(errs, fail(fe.Field, fe.Line, fe.Msg))
	}
	// Validate what did decode too, so one run reports everything, but not
	// a field already reported as undecodable.
	obj.Default()
	for _, fe := range obj.Validate() {
		if !decodeFailed(d.errs, fe.Field) {
			errs = append(errs, fail(fe.Field, origin.LineOf(fe.Field), fe.ErrorBody()))
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].(*Error).Line < errs[j].(*Error).Line })
		return nil, errors.Join(errs...)
	}
	switch o := obj.(type) {
	case *v1alpha1.ManifestSync:
		return ManifestSync{ManifestSync: o, Origin: origin}, nil
	case *v1alpha1.RunConfig:
		return RunConfig{RunConfig: o, Origin: origin}, nil
	case *v1alpha1.Image:
		return Image{Image: o, Origin: origin}, nil
	case *v1alpha1.RepoConfig:
		return RepoConfig{RepoConfig: o, Origin: origin}, nil
	}
	return nil, nil
}

func decodeFailed(errs []fieldError, path string) bool {
	for _, e := range errs {
		if e.Field == path || strings.HasPrefix(path, e.Field+".") || strings.HasPrefix(path, e.Field+"[") {
			return true
		}
	}
	return false
}

func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	if c := child(m, key); c != nil && c.Kind == yaml.ScalarNode {
		return c.Value
	}
	return ""
}

func lineOf(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return m.Line
}

// yamlErrorLine digs the line out of a yaml.v3 syntax error ("yaml: line 7:
// did not find expected key").
func yamlErrorLine(err error) int {
	var line int
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		fmt.Sscanf(msg[i:], "line %d", &line)
	}
	return line
}

func yamlErrorMsg(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if i := strings.Index(msg, "line "); i == 0 {
		if j := strings.Index(msg, ": "); j >= 0 {
			msg = msg[j+2:]
		}
	}
	return "YAML syntax: " + msg
}
