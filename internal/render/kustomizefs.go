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
	f, err := k.fsys.Open(rel(p))
	if err != nil {
		return nil, err
	}
	return readOnlyFile{f}, nil
}

type readOnlyFile struct{ fs.File }

func (readOnlyFile) Write([]byte) (int, error) { return 0, errReadOnly }

func (k *kustomizeFS) IsDir(p string) bool {
	info, err := k.fsys.Stat(rel(p))
	return err == nil && info.IsDir()
}

func (k *kustomizeFS) ReadDir(p string) ([]string, error) {
	entries, err := k.fsys.ReadDir(rel(p))
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
	info, err := k.fsys.Stat(rel(p))
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if info.IsDir() {
		return filesys.ConfirmedDir(abs), "", nil
	}
	return filesys.ConfirmedDir(path.Dir(abs)), path.Base(abs), nil
}

func (k *kustomizeFS) Exists(p string) bool {
	_, err := k.fsys.Stat(rel(p))
	return err == nil
}

func (k *kustomizeFS) Glob(pattern string) ([]string, error) {
	matches, err := fs.Glob(k.fsys, rel(pattern))
	if err != nil {
		return nil, err
	}
	for i, m := range matches {
		matches[i] = "/" + m
	}
	return matches, nil
}

func (k *kustomizeFS) ReadFile(p string) ([]byte, error) {
	data, err := k.fsys.ReadFile(rel(p))
	if err != nil {
		return nil, err
	}
	if !isKustomizationFile(p) {
		return data, nil
	}
	return k.rewrite(p, data)
}

func (k *kustomizeFS) Walk(p string, walkFn filepath.WalkFunc) error {
	return fs.WalkDir(k.fsys, rel(p), func(name string, d fs.DirEntry, err error) error {
		full := "/" + name
		if name == "." {
			full = "/"
		}
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
			if _, err := k.fsys.Stat(path.Join(dir, r)); err == nil {
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
