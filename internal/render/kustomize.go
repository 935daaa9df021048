package render

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"

	goyaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// kustomizeDir builds the kustomization in dir, as `kubectl kustomize`
// would (legacy resource order, no plugins but the built-in ones).
func kustomizeDir(ctx context.Context, fsys source.FS, dir string, s v1alpha1.KustomizeRender, bases func(context.Context, string) (*Base, error), remoteFiles *[]string) (objs []*yaml.RNode, origins []string, err error) {
	if s.EnableHelm {
		return nil, nil, fmt.Errorf("render.kustomize.enableHelm: kustomize's helmCharts run the helm binary; point the sync at the chart (render.helm) instead")
	}
	opts := krusty.MakeDefaultOptions()
	// kubectl kustomize sorts in legacy order unless the kustomization says
	// otherwise; "unspecified" does that without logging a warning.
	opts.Reorder = krusty.ReorderOptionUnspecified
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	if s.LoadRestrictor == v1alpha1.LoadRestrictorNone {
		opts.LoadRestrictions = types.LoadRestrictionsNone
	}
	var refused error
	kfs := &kustomizeFS{fsys: fsys, root: path.Join("/", dir)}
	mounted := map[string]string{}
	kfs.remote = func(kust, url string) (string, error) {
		if isRemoteFile(url) {
			*remoteFiles = append(*remoteFiles, url)
			return url, nil
		}
		// Kustomize takes a base by a path relative to the kustomization.
		relTo := func(p string) string {
			r, err := filepath.Rel(path.Dir("/"+kust), p)
			if err != nil {
				return p
			}
			return filepath.ToSlash(r)
		}
		if p, ok := mounted[url]; ok {
			return relTo(p), nil
		}
		if bases == nil {
			if refused == nil {
				refused = fmt.Errorf("%s: remote base %q: remote bases are not read here; vendor it into the repository", kust, url)
			}
			// A path that cannot exist: kustomize fails to load it, and the
			// error above is what the user sees.
			return "/.sluice/remote-base-refused", nil
		}
		b, err := bases(ctx, url)
		if err != nil {
			if refused == nil {
				refused = fmt.Errorf("%s: remote base %q: %w", kust, url, err)
			}
			return "/.sluice/remote-base-refused", nil
		}
		prefix := fmt.Sprintf(".sluice/remote/%d", len(kfs.mounts))
		kfs.mounts = append(kfs.mounts, mount{prefix: prefix, fsys: b.FS})
		*remoteFiles = append(*remoteFiles, url+"@"+b.ID)
		p := "/" + path.Join(prefix, b.Dir)
		mounted[url] = p
		return relTo(p), nil
	}
	// krusty panics on some malformed input; a bad overlay must fail its
	// sync, not the run.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kustomize panicked: %v", r)
		}
	}()
	m, err := krusty.MakeKustomizer(opts).Run(kfs, path.Join("/", dir))
	if refused != nil {
		return nil, nil, refused
	}
	if err != nil {
		return nil, nil, err
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, nil, err
	}
	if objs, err = kio.FromBytes(out); err != nil {
		return nil, nil, err
	}
	return objs, kfs.origins(objs, dir), nil
}

// originAnnotation is where kustomize records each object's file when the
// kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// origins reads each object's origin annotation (which kustomizeFS asked
// for) and removes it again unless the kustomization itself wants it, so
// the output is what `kubectl kustomize` gives.
func (k *kustomizeFS) origins(objs []*yaml.RNode, dir string) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = dir
		a := o.GetAnnotations()[originAnnotation]
		if a == "" {
			continue
		}
		var origin struct {
			Path         string `yaml:"path"`
			ConfiguredIn string `yaml:"configuredIn"`
		}
		if goyaml.Unmarshal([]byte(a), &origin) == nil {
			p := origin.Path
			if p == "" {
				p = origin.ConfiguredIn
			}
			if p != "" && !strings.Contains(p, "://") {
				out[i] = path.Join(dir, p)
			}
		}
		if k.injectedOrigin {
			o.PipeE(yaml.ClearAnnotation(originAnnotation))
			if len(o.GetAnnotations()) == 0 {
				o.PipeE(yaml.Lookup("metadata"), yaml.Clear("annotations"))
			}
		}
	}
	return out
}

// warmOnce guards Warm.
var warmOnce sync.Once

// Warm starts, in the background, what the first kustomize build of a
// process would otherwise pay for in its own time: parsing the built-in
// Kubernetes OpenAPI schema (tens of milliseconds). A run that may render
// calls it early, so the parse overlaps the run's waiting on git and
// registries.
func Warm() {
	warmOnce.Do(func() {
		go openapi.SchemaForResourceType(yaml.TypeMeta{})
	})
}
