package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"sluice.dev/sluice/internal/source"
)

// kustomizeFS presents a source tree to kustomize as a read-only file
// system rooted at "/". Kustomize cannot leave it: ".." above the root
// stays at the root, and CleanedAbs follows symbolic links itself (as
// kustomize's on-disk file system does with EvalSymlinks), so that
// kustomize's own load restrictor sees where a linked file really is and
// refuses one outside the kustomization's folder.
type kustomizeFS struct {
	ctx  context.Context
	fsys source.FS
	lim  Limits
	// root is the folder being built; with origins set, its kustomization
	// gets buildMetadata: [originAnnotations], so every object says its
	// file.
	root           string
	origins        bool
	injectedOrigin bool
	// remote maps a remote resource a kustomization names to the path
	// kustomize should load instead: kustomize would clone it with the
	// git binary, which Sluice never runs.
	remote func(kustomization, field, url string) string
	// mounts are remote bases' trees and fetched files, at paths under
	// /.sluice/remote.
	mounts []mount
	// missing are the resources named that exist neither in the tree nor
	// as a remote: kustomize is not given the chance to take them for a
	// git URL.
	missing error
	// generated, if set, is the root's kustomization file as a GitOps
	// tool's settings make it, in place of the tree's (or where it has
	// none).
	generated *generatedFile
	// read, if set, is given each file read (Options.Read).
	read func(ctx context.Context, name string, data []byte) ([]byte, error)
}

// generatedFile is a file kustomize reads that the tree does not hold as
// such.
type generatedFile struct {
	path string // a kustomize path: "/apps/kustomization.yaml"
	data []byte
}

// isGenerated reports whether p is the generated file.
func (k *kustomizeFS) isGenerated(p string) bool {
	return k.generated != nil && path.Join("/", rel(p)) == k.generated.path
}

// mount is a tree presented at a path of the kustomize file system.
type mount struct {
	prefix string // a path as rel gives it: ".sluice/remote/0"
	fsys   source.FS
}

// at maps a kustomize path to the tree holding it and the path there.
func (k *kustomizeFS) at(p string) (source.FS, string) {
	r := rel(p)
	for _, m := range k.mounts {
		if r == m.prefix {
			return m.fsys, "."
		}
		if strings.HasPrefix(r, m.prefix+"/") {
			return m.fsys, r[len(m.prefix)+1:]
		}
	}
	return k.fsys, r
}

// unmap turns a path of a tree back into the kustomize path.
func (k *kustomizeFS) unmap(fsys source.FS, p string) string {
	for _, m := range k.mounts {
		if m.fsys == fsys {
			if p == "." {
				return "/" + m.prefix
			}
			return "/" + m.prefix + "/" + p
		}
	}
	if p == "." {
		return "/"
	}
	return "/" + p
}

var _ filesys.FileSystem = &kustomizeFS{}

var errReadOnly = errors.New("the source tree is read-only")

// rel maps an absolute kustomize path to a path in the source.FS.
func rel(p string) string {
	p = filepath.ToSlash(filepath.Clean("/" + p))
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

func (k *kustomizeFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (k *kustomizeFS) Mkdir(string) error                  { return errReadOnly }
func (k *kustomizeFS) MkdirAll(string) error               { return errReadOnly }
func (k *kustomizeFS) RemoveAll(string) error              { return errReadOnly }
func (k *kustomizeFS) WriteFile(string, []byte) error      { return errReadOnly }

func (k *kustomizeFS) Open(p string) (filesys.File, error) {
	if k.isGenerated(p) {
		name := path.Base(k.generated.path)
		f, err := newMemFile(name, k.generated.data).Open(name)
		if err != nil {
			return nil, err
		}
		return readOnlyFile{f}, nil
	}
	fsys, r := k.at(p)
	f, err := fsys.Open(r)
	if err != nil {
		return nil, err
	}
	return readOnlyFile{f}, nil
}

type readOnlyFile struct{ fs.File }

func (readOnlyFile) Write([]byte) (int, error) { return 0, errReadOnly }

func (k *kustomizeFS) IsDir(p string) bool {
	if k.isGenerated(p) {
		return false
	}
	fsys, r := k.at(p)
	info, err := fsys.Stat(r)
	return err == nil && info.IsDir()
}

func (k *kustomizeFS) ReadDir(p string) ([]string, error) {
	fsys, r := k.at(p)
	entries, err := fsys.ReadDir(r)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	if k.generated != nil && path.Join("/", rel(p)) == path.Dir(k.generated.path) && !slices.Contains(names, path.Base(k.generated.path)) {
		names = append(names, path.Base(k.generated.path))
		slices.Sort(names)
	}
	return names, nil
}

// CleanedAbs returns the directory a path is in, and its file name, with
// every symbolic link on the way followed.
func (k *kustomizeFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if k.isGenerated(p) {
		return filesys.ConfirmedDir(path.Dir(k.generated.path)), path.Base(k.generated.path), nil
	}
	fsys, r := k.at(p)
	res, err := source.Resolve(fsys, r)
	if err == nil {
		_, err = fsys.Stat(res.Path)
	}
	if err != nil {
		if err := explainLink(fsys, r, err); source.IsLinkError(err) {
			return "", "", err
		}
		return "", "", fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	abs := k.unmap(fsys, res.Path)
	info, err := fsys.Stat(res.Path)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if info.IsDir() {
		return filesys.ConfirmedDir(abs), "", nil
	}
	return filesys.ConfirmedDir(path.Dir(abs)), path.Base(abs), nil
}

func (k *kustomizeFS) Exists(p string) bool {
	if k.isGenerated(p) {
		return true
	}
	fsys, r := k.at(p)
	_, err := fsys.Stat(r)
	return err == nil
}

func (k *kustomizeFS) Glob(pattern string) ([]string, error) {
	fsys, r := k.at(pattern)
	matches, err := fs.Glob(fsys, r)
	if err != nil {
		return nil, err
	}
	for i, m := range matches {
		matches[i] = k.unmap(fsys, m)
	}
	return matches, nil
}

func (k *kustomizeFS) ReadFile(p string) ([]byte, error) {
	if err := k.ctx.Err(); err != nil {
		return nil, err
	}
	fsys, r := k.at(p)
	var data []byte
	var err error
	if k.isGenerated(p) {
		data = k.generated.data
	} else if data, err = fsys.ReadFile(r); err != nil {
		return nil, err
	}
	if k.read != nil {
		if data, err = k.read(k.ctx, rel(p), data); err != nil {
			return nil, err
		}
	}
	if err := k.check(r, data); err != nil {
		return nil, err
	}
	if !isKustomizationFile(p) {
		return data, nil
	}
	return k.rewrite(p, data)
}

// check refuses, before kustomize parses it, a YAML or JSON file that
// nests past the limit (kustomize spends seconds per thousand levels) or
// names more objects than a render may give (kustomize holds every one
// in memory before it is counted).
func (k *kustomizeFS) check(name string, data []byte) error {
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json", "":
	default:
		return nil
	}
	if d, line := yamlDepth(data); d > k.lim.Depth {
		return depthError(name, line, d, k.lim.Depth)
	}
	if n := kindKeys(data); n > k.lim.Objects {
		return &LimitError{What: "file " + name, Got: fmt.Sprintf("%d objects", n), Max: fmt.Sprintf("%d objects per render", k.lim.Objects), Flag: FlagObjects}
	}
	return nil
}

// kindKeys counts the keys named kind in a YAML or JSON text: at least
// one per object it holds.
func kindKeys(data []byte) int {
	n := 0
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte("kind"))
		if j < 0 {
			return n
		}
		at := i + j
		i = at + 4
		if at > 0 {
			switch data[at-1] {
			case ' ', '\t', '\n', '{', ',', '"', '\'':
			default:
				continue
			}
		}
		rest := bytes.TrimLeft(data[i:min(i+8, len(data))], `"' 	`)
		if len(rest) > 0 && rest[0] == ':' {
			n++
		}
	}
}

func (k *kustomizeFS) Walk(p string, walkFn filepath.WalkFunc) error {
	fsys, r := k.at(p)
	return source.Walk(k.ctx, fsys, r, source.WalkOptions{}, func(name string, d fs.DirEntry, err error) error {
		full := k.unmap(fsys, name)
		if err != nil {
			return walkFn(full, nil, err)
		}
		info, ierr := d.Info()
		return walkFn(full, info, ierr)
	})
}

// kustomizationFiles are the names kustomize looks for, in its order.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

func isKustomizationFile(p string) bool {
	base := path.Base(filepath.ToSlash(p))
	for _, n := range kustomizationFiles {
		if base == n {
			return true
		}
	}
	return false
}

// remoteFields are the kustomization fields whose entries (strings, or a
// map's "path") kustomize loads as a file or a directory, and so would
// fetch or clone when they name a URL.
var remoteFields = map[string]bool{
	"resources": true, "components": true, "bases": true,
	"transformers": true, "generators": true, "validators": true,
	"crds": true, "configurations": true,
	"patchesStrategicMerge": true, "patches": true, "patchesJson6902": true, "replacements": true,
}

// rewrite adjusts a kustomization as read. Every entry of a loading field
// that is not a path of the tree is replaced by what k.remote returns for
// it (a remote git base or file, opened in process and mounted inside the
// tree), so that kustomize never runs the git binary; an entry that is
// neither is recorded as missing. The root kustomization asks for origin
// annotations when origins are wanted.
func (k *kustomizeFS) rewrite(file string, data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return data, nil // kustomize reports the syntax error in its own words
	}
	m := doc.Content[0]
	dir := path.Dir(rel(file))
	changed := false
	if k.origins && path.Dir(path.Join("/", rel(file))) == k.root && !k.injectedOrigin {
		changed = k.askForOrigins(m) || changed
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		field := m.Content[i].Value
		if !remoteFields[field] {
			continue
		}
		for _, item := range entries(m.Content[i+1]) {
			r := item.Value
			if r == "" || strings.HasPrefix(r, "/.sluice/") {
				continue
			}
			fsys, p := k.at("/" + path.Join(dir, r))
			_, err := fsys.Stat(p)
			if err == nil {
				continue
			}
			var le *source.LinkError
			if errors.As(err, &le) {
				k.missing = errors.Join(k.missing, fmt.Errorf("%s: %s: %w", rel(file), field, le))
				item.Value, changed = refusedPath, true
				continue
			}
			if !looksRemote(r) {
				if field == "resources" || field == "components" || field == "bases" {
					k.missing = errors.Join(k.missing, fmt.Errorf("%s: %s: %q: no such file or folder in the source", rel(file), field, r))
					item.Value, changed = refusedPath, true
				}
				continue // kustomize reports a missing patch or config file itself
			}
			to := k.remote(rel(file), field, r)
			if to != r {
				item.Value, changed = to, true
			}
		}
	}
	if !changed {
		return data, nil
	}
	return yaml.Marshal(&doc)
}

// refusedPath is where a refused or missing remote points kustomize: a
// path that cannot exist, so kustomize fails to load it, and the error
// recorded for it is what the user sees.
const refusedPath = "/.sluice/refused"

// entries are the loadable entries of a kustomization field: its strings,
// or the "path" of its mappings (patches: [{path: ...}]).
func entries(n *yaml.Node) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		return nil
	}
	var out []*yaml.Node
	for _, item := range n.Content {
		switch item.Kind {
		case yaml.ScalarNode:
			out = append(out, item)
		case yaml.MappingNode:
			for j := 0; j+1 < len(item.Content); j += 2 {
				if item.Content[j].Value == "path" && item.Content[j+1].Kind == yaml.ScalarNode {
					out = append(out, item.Content[j+1])
				}
			}
		}
	}
	return out
}

// askForOrigins adds originAnnotations to a kustomization's buildMetadata
// unless it is there already.
func (k *kustomizeFS) askForOrigins(m *yaml.Node) bool {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "buildMetadata" {
			continue
		}
		for _, v := range m.Content[i+1].Content {
			if v.Value == "originAnnotations" {
				return false // the user wants them in the output too
			}
		}
		m.Content[i+1].Content = append(m.Content[i+1].Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "originAnnotations"})
		m.Content[i+1].Style = 0
		k.injectedOrigin = true
		return true
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Value: "buildMetadata"},
		&yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "originAnnotations"}}})
	k.injectedOrigin = true
	return true
}

// looksRemote tells a remote resource (a git repository, or a file URL)
// from a local path, as kustomize's loader would.
func looksRemote(r string) bool {
	switch {
	case strings.Contains(r, "://"), strings.HasPrefix(r, "git@"), strings.HasPrefix(r, "git::"), strings.HasPrefix(r, "gh:"),
		strings.Contains(r, "?ref="), strings.Contains(r, "?version="), strings.Contains(r, "?timeout="), strings.Contains(r, "?submodules="):
		return true
	}
	first, _, _ := strings.Cut(r, "/")
	return strings.Contains(first, ".") && first != "." && first != ".." && strings.Count(r, "/") >= 2
}

// isRemoteFile reports whether a remote resource is a single file fetched
// over HTTP.
func isRemoteFile(r string) bool {
	if !strings.HasPrefix(r, "https://") && !strings.HasPrefix(r, "http://") {
		return false
	}
	if strings.Contains(r, "?") || strings.Contains(strings.SplitN(r, "://", 2)[1], "//") {
		return false
	}
	switch path.Ext(r) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
