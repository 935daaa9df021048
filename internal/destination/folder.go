package destination

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// Folder is the content of one destination folder: slash-separated paths
// relative to the folder, and their bytes.
type Folder map[string][]byte

// Names returns the folder's paths, sorted.
func (f Folder) Names() []string {
	names := make([]string, 0, len(f))
	for n := range f {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Hashes maps each path to its git blob hash.
func (f Folder) Hashes() map[string]string {
	out := make(map[string]string, len(f))
	for n, data := range f {
		out[n] = source.BlobHash(data)
	}
	return out
}

// TreeHash is the git tree hash the folder has once written.
func (f Folder) TreeHash() (string, error) {
	h, err := writeFolder(source.NewMemoryBatch(), f)
	return h.String(), err
}

// Digest is a digest over the paths and blob hashes of a folder, leaving
// out the provenance record and its .sourceignore: what
// Provenance.Manifests holds.
func Digest(hashes map[string]string) string {
	names := make([]string, 0, len(hashes))
	for n := range hashes {
		if n != v1alpha1.ProvenanceFile && n != v1alpha1.SourceIgnoreFile {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %s\n", n, hashes[n])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Manifests lays objects out as files: one per object
// ("deployment-web.yaml"), or all in one manifest.yaml, in the order given.
func Manifests(objs []*yaml.RNode, layout string) (Folder, error) {
	f := Folder{}
	if layout == v1alpha1.LayoutSingle {
		var b strings.Builder
		for i, o := range objs {
			s, err := o.String()
			if err != nil {
				return nil, err
			}
			if i > 0 {
				b.WriteString("---\n")
			}
			b.WriteString(s)
		}
		if len(objs) > 0 {
			f["manifest.yaml"] = []byte(b.String())
		}
		return f, nil
	}
	names := fileNames(objs)
	for i, o := range objs {
		s, err := o.String()
		if err != nil {
			return nil, err
		}
		if _, dup := f[names[i]]; dup {
			return nil, fmt.Errorf("two objects are both %s %s/%s", o.GetApiVersion()+"/"+o.GetKind(), o.GetNamespace(), o.GetName())
		}
		f[names[i]] = []byte(s)
	}
	return f, nil
}

// fileNames names each object's file "kind-name.yaml", adding the
// namespace, then the API group, only where names would collide, so names
// stay short and stable.
func fileNames(objs []*yaml.RNode) []string {
	forms := []func(o *yaml.RNode) string{
		func(o *yaml.RNode) string { return o.GetKind() + "-" + o.GetName() },
		func(o *yaml.RNode) string { return o.GetKind() + "-" + join(o.GetNamespace(), o.GetName()) },
		func(o *yaml.RNode) string {
			group, _, _ := strings.Cut(o.GetApiVersion(), "/")
			if !strings.Contains(o.GetApiVersion(), "/") {
				group = "core"
			}
			return o.GetKind() + "." + group + "-" + join(o.GetNamespace(), o.GetName())
		},
	}
	names := make([]string, len(objs))
	level := make([]int, len(objs))
	for changed := true; changed; {
		changed = false
		count := map[string]int{}
		for i, o := range objs {
			names[i] = sanitize(forms[level[i]](o)) + ".yaml"
			count[names[i]]++
		}
		for i := range objs {
			if count[names[i]] > 1 && level[i] < len(forms)-1 {
				level[i]++
				changed = true
			}
		}
	}
	return names
}

func join(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "-" + name
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, path.Clean(s))
}
