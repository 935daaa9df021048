package hydrate

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/destination"
)

// Changes is what a dry run would change in a folder, object by object:
// each named "Kind namespace/name" ("Kind name" for one without a
// namespace), or "file NAME" for a file that holds no object.
type Changes struct {
	Added   []string `json:"added,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// Repinned are the images pinned to a digest the folder does not
	// hold yet: "NAME:TAG@DIGEST".
	Repinned []string `json:"repinned,omitempty"`
}

// Empty reports whether nothing changes.
func (c *Changes) Empty() bool {
	return c == nil || len(c.Added)+len(c.Changed)+len(c.Removed)+len(c.Repinned) == 0
}

// folderChanges compares two folders object by object (the provenance
// record and .sourceignore aside), and the images each pins.
func folderChanges(old, cur destination.Folder, was, is []v1alpha1.PinnedImage) *Changes {
	a, b := objectsOf(old), objectsOf(cur)
	c := &Changes{}
	for id, o := range b {
		switch prev, ok := a[id]; {
		case !ok:
			c.Added = append(c.Added, id)
		case prev != o:
			c.Changed = append(c.Changed, id)
		}
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			c.Removed = append(c.Removed, id)
		}
	}
	pinned := map[string]bool{}
	for _, p := range was {
		pinned[p.Ref()] = true
	}
	seen := map[string]bool{}
	for _, p := range is {
		if ref := p.Ref(); !pinned[ref] && !seen[ref] {
			seen[ref] = true
			c.Repinned = append(c.Repinned, ref)
		}
	}
	for _, l := range [][]string{c.Added, c.Changed, c.Removed, c.Repinned} {
		sort.Strings(l)
	}
	return c
}

// objectsOf maps each object of a folder's YAML files to its text.
func objectsOf(f destination.Folder) map[string]string {
	out := map[string]string{}
	for name, data := range f {
		if name == v1alpha1.ProvenanceFile || name == v1alpha1.SourceIgnoreFile {
			continue
		}
		if ext := path.Ext(name); ext != ".yaml" && ext != ".yml" && ext != ".json" {
			out["file "+name] = string(data)
			continue
		}
		nodes, err := kio.FromBytes(data)
		if err != nil {
			out["file "+name] = string(data)
			continue
		}
		for _, n := range nodes {
			out[objectID(n, name)] = n.MustString()
		}
	}
	return out
}

// objectID names an object as kubectl does, its group included where it
// has one; a document that is no object is named by its file.
func objectID(n *yaml.RNode, file string) string {
	kind, name := n.GetKind(), n.GetName()
	if kind == "" || name == "" {
		return "file " + file
	}
	if g, _, ok := strings.Cut(n.GetApiVersion(), "/"); ok {
		kind += "." + g
	}
	if ns := n.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", kind, ns, name)
	}
	return kind + " " + name
}
