package render

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"sluice.dev/sluice/internal/source"
)

// kustomizeFS presents a source.FS to kustomize as a read-only file system
// rooted at "/". Kustomize cannot leave it: ".." above the root stays at the
// root, as it does on a real disk.
type kustomizeFS struct {
	fsys source.FS
	// root is the folder being built; its kustomization gets
	// buildMetadata: [originAnnotations], so every object says its file.
	root           string
	injectedOrigin bool
	// remote maps a remote resource a kustomization names to what
	// kustomize should load instead: kustomize would clone it with the git
	// binary, which Sluice does not run.
	remote func(kustomization, url string) (string, error)
	// mounts are remote bases' trees, at paths under /.sluice/remote.
	mounts []mount
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
	return names, nil
}

func (k *kustomizeFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	abs := "/" + rel(p)
	if abs == "/." {
		abs = "/"
	}
	fsys, r := k.at(p)
	info, err := fsys.Stat(r)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if info.IsDir() {
		return filesys.ConfirmedDir(abs), "", nil
	}
	return filesys.ConfirmedDir(path.Dir(abs)), path.Base(abs), nil
}

func (k *kustomizeFS) Exists(p string) bool {
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
	fsys, r := k.at(p)
	data, err := fsys.ReadFile(r)
	if err != nil {
		return nil, err
	}
	if !isKustomizationFile(p) {
		return data, nil
	}
	return k.rewrite(p, data)
}

func (k *kustomizeFS) Walk(p string, walkFn filepath.WalkFunc) error {
	fsys, r := k.at(p)
	return fs.WalkDir(fsys, r, func(name string, d fs.DirEntry, err error) error {
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

// rewrite adjusts a kustomization as read. Each remote git resource it
// names is replaced by what k.remote returns for it (a path inside the
// tree), so that kustomize never runs the git binary to clone it; remote
// files (http URLs of one YAML) are left to kustomize, which downloads them
// in process. The root kustomization asks for origin annotations.
func (k *kustomizeFS) rewrite(file string, data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return data, nil // kustomize reports the syntax error in its own words
	}
	m := doc.Content[0]
	dir := path.Dir(rel(file))
	changed := false
	if path.Dir(path.Join("/", rel(file))) == k.root && !k.injectedOrigin {
		changed = k.askForOrigins(m) || changed
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case "resources", "components", "bases":
		default:
			continue
		}
		for _, item := range m.Content[i+1].Content {
			r := item.Value
			if item.Kind != yaml.ScalarNode || !looksRemote(r) {
				continue
			}
			fsys, p := k.at("/" + path.Join(dir, r))
			if _, err := fsys.Stat(p); err == nil {
				continue
			}
			if k.remote == nil {
				continue
			}
			to, err := k.remote(rel(file), r)
			if err != nil {
				return nil, err
			}
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
	case strings.Contains(r, "://"), strings.HasPrefix(r, "git@"), strings.Contains(r, "?ref="), strings.Contains(r, "?version="):
		return true
	}
	first, _, _ := strings.Cut(r, "/")
	return strings.Contains(first, ".") && first != "." && first != ".." && strings.Count(r, "/") >= 2
}

// isRemoteFile reports whether a remote resource is a single file fetched
// over HTTP (kustomize downloads those itself, in process).
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
