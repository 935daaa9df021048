package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// cacheFormat changes when a cached render could differ from a fresh one
// for reasons its key does not cover.
const cacheFormat = 2

// cached is a render kept on disk with the inputs it read: while every
// input has the same hash, the render is the same and need not run again.
type cached struct {
	Format   int               `json:"format"`
	Renderer v1alpha1.Renderer `json:"renderer"`
	Inputs   []v1alpha1.Input  `json:"inputs"`
	Objects  []json.RawMessage `json:"objects"`
	Origins  []string          `json:"origins"`
}

func cacheKey(dir string, o Options) string {
	data, _ := json.Marshal(struct {
		Dir          string
		Render       *v1alpha1.Render
		Release      string
		Engines      map[string]string
		Capabilities Capabilities
		IncludeCRDs  bool
		Origins      bool
		Limits       Limits
	}{dir, o.Render, o.ReleaseName, engineVersions(), o.Capabilities, o.IncludeCRDs, o.Origins, o.Limits.WithDefaults()})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// fromCache returns the cached render of dir if its inputs are unchanged
// in fsys.
func fromCache(cacheDir, key string, fsys source.FS) *Result {
	data, err := os.ReadFile(filepath.Join(cacheDir, key+".json"))
	if err != nil {
		return nil
	}
	var c cached
	if json.Unmarshal(data, &c) != nil || c.Format != cacheFormat || !source.Unchanged(fsys, c.Inputs, nil) {
		return nil
	}
	// The objects stay JSON until someone asks for YAML nodes: a caller
	// that sends them to a cluster needs JSON anyway.
	return &Result{Renderer: c.Renderer, Inputs: c.Inputs, Origins: c.Origins, JSON: c.Objects}
}

// toCache keeps a render; failures only cost the next run its shortcut.
func toCache(cacheDir, key string, res *Result) {
	if len(res.Remote) > 0 || res.Chart != nil {
		return // inputs outside the tree: a cache could not tell they moved
	}
	objs, err := res.JSONObjects()
	if err != nil {
		return
	}
	c := cached{Format: cacheFormat, Renderer: res.Renderer, Inputs: res.Inputs, Origins: res.Origins, Objects: objs}
	data, err := json.Marshal(c)
	if err != nil {
		return
	}
	source.WriteFile(filepath.Join(cacheDir, key+".json"), data)
}
