package render

import (
	"fmt"
	"path"
	"sync"

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
func kustomizeDir(fsys source.FS, dir string, s v1alpha1.KustomizeRender, remoteFiles *[]string) (objs []*yaml.RNode, err error) {
	if s.EnableHelm {
		return nil, fmt.Errorf("render.kustomize.enableHelm: kustomize's helmCharts run the helm binary; point the sync at the chart (render.helm) instead")
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
	kfs := kustomizeFS{fsys: fsys, remote: func(kust, url string) (string, error) {
		if isRemoteFile(url) {
			*remoteFiles = append(*remoteFiles, url)
			return url, nil
		}
		if refused == nil {
			refused = fmt.Errorf("%s: remote base %q: Sluice does not clone remote bases yet; vendor it into the repository", kust, url)
		}
		// A path that cannot exist: kustomize fails to load it, and the
		// error above is what the user sees.
		return "/.sluice/remote-base-refused", nil
	}}
	// krusty panics on some malformed input; a bad overlay must fail its
	// sync, not the run.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kustomize panicked: %v", r)
		}
	}()
	m, err := krusty.MakeKustomizer(opts).Run(kfs, path.Join("/", dir))
	if refused != nil {
		return nil, refused
	}
	if err != nil {
		return nil, err
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	return kio.FromBytes(out)
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
