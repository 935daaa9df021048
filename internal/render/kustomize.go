package render

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	goyaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/source"
)

// kustomizeRun is one kustomize build's settings and what it collects.
type kustomizeRun struct {
	settings v1alpha1.KustomizeRender
	bases    func(context.Context, string) (*Base, error)
	fetch    func(context.Context, string, int64) ([]byte, error)
	egress   *egress.Policy
	origins  bool
	limits   Limits
	// generate, if set, gives the root's kustomization file (see
	// Options.Kustomization).
	generate func(fsys source.FS, dir string, own []byte) ([]byte, error)
	// read, if set, is given each file read (Options.Read).
	read func(ctx context.Context, name string, data []byte) ([]byte, error)
	// remote collects the remote bases and files read.
	remote []string
}

// kustomizeDir builds the kustomization in dir, as `kustomize build` (and
// `kubectl kustomize`) would: legacy resource order, the built-in
// generators and transformers only, files restricted to the
// kustomization's folder unless the settings say none. Remote bases and
// files are opened in process and mounted into the tree; kustomize never
// runs git.
// kustomized is a kustomize build's output: as kustomize prints it, and
// as objects when origins were asked (they are read off the objects).
type kustomized struct {
	yaml    []byte
	count   int
	objects []*yaml.RNode
	origins []string
}

func kustomizeDir(ctx context.Context, g *guard, dir string, kr *kustomizeRun) (out *kustomized, err error) {
	s := kr.settings
	if s.EnableHelm {
		return nil, fmt.Errorf("render.kustomize.enableHelm: kustomize's helmCharts run the helm binary; point the sync at the chart (render.helm) instead")
	}
	opts := krusty.MakeDefaultOptions()
	// kustomize sorts in legacy order unless the kustomization says
	// otherwise; "unspecified" does that without logging a warning.
	opts.Reorder = krusty.ReorderOptionUnspecified
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	if s.LoadRestrictor == v1alpha1.LoadRestrictorNone {
		opts.LoadRestrictions = types.LoadRestrictionsNone
	}
	var refused error
	kfs := &kustomizeFS{ctx: ctx, fsys: g, lim: kr.limits, root: path.Join("/", dir), origins: kr.origins, read: kr.read}
	if kr.generate != nil {
		name, own := kustomizationFiles[0], []byte(nil)
		for _, n := range kustomizationFiles {
			if data, err := g.ReadFile(path.Join(dir, n)); err == nil {
				name, own = n, data
				break
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		data, err := kr.generate(g, dir, own)
		if err != nil {
			return nil, err
		}
		kfs.generated = &generatedFile{path: path.Join("/", dir, name), data: data}
	}
	mounted := map[string]string{}
	kfs.remote = func(kust, field, u string) string {
		// Kustomize takes an entry by a path relative to the kustomization.
		relTo := func(p string) string {
			r, err := filepath.Rel(path.Dir("/"+kust), p)
			if err != nil {
				return p
			}
			return filepath.ToSlash(r)
		}
		if p, ok := mounted[u]; ok {
			return relTo(p)
		}
		fail := func(err error) string {
			if refused == nil {
				refused = fmt.Errorf("%s: %s: %q: %w", kust, field, source.Redact(u), err)
			}
			return refusedPath
		}
		prefix := fmt.Sprintf(".sluice/remote/%d", len(kfs.mounts))
		var p string
		if isRemoteFile(u) {
			if kr.fetch == nil {
				return fail(errors.New("remote files are refused here (--no-remote-bases): vendor it into the repository"))
			}
			data, err := kr.fetch(egress.WithPolicy(ctx, kr.egress), u, kr.limits.FileBytes)
			if err != nil {
				return fail(err)
			}
			name := remoteFileName(u)
			fsys := g.mount(newMemFile(name, data))
			if _, err := fsys.ReadFile(name); err != nil { // counted, and its aliases bounded
				return fail(err)
			}
			// A file is mounted in the kustomization's own folder, where
			// kustomize's load restrictor lets it read files.
			prefix = path.Join(path.Dir(kust), prefix)
			kfs.mounts = append(kfs.mounts, mount{prefix: prefix, fsys: fsys})
			kr.remote = append(kr.remote, u)
			p = "/" + path.Join(prefix, name)
		} else {
			if kr.bases == nil {
				return fail(errors.New("remote bases are refused here (--no-remote-bases): vendor it into the repository"))
			}
			b, err := kr.bases(egress.WithPolicy(ctx, kr.egress), u)
			if err != nil {
				return fail(err)
			}
			kfs.mounts = append(kfs.mounts, mount{prefix: prefix, fsys: g.mount(b.FS)})
			kr.remote = append(kr.remote, u+"@"+b.ID)
			p = "/" + path.Join(prefix, b.Dir)
		}
		mounted[u] = p
		return relTo(p)
	}
	// krusty panics on some malformed input; a bad overlay must fail its
	// sync, not the run.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kustomize panicked: %v", r)
		}
	}()
	m, err := schemaBuild(ownSchema(g, dir), func() (resmap.ResMap, error) {
		refused, kfs.missing = nil, nil
		return krusty.MakeKustomizer(opts).Run(kfs, path.Join("/", dir))
	})
	if refused != nil {
		return nil, refused
	}
	if kfs.missing != nil {
		return nil, kfs.missing
	}
	if err != nil {
		return nil, explainRestrictor(err, g)
	}
	out = &kustomized{count: m.Size()}
	if err := kr.limits.checkOutput(out.count, 0); err != nil {
		return nil, err
	}
	if out.yaml, err = m.AsYaml(); err != nil {
		return nil, err
	}
	m = nil // the build's own tree can go before the output is parsed
	if err := kr.limits.checkOutput(0, int64(len(out.yaml))); err != nil {
		return nil, err
	}
	if kr.origins {
		if out.objects, err = decodeNodes(out.yaml); err != nil {
			return nil, err
		}
		out.origins = kfs.readOrigins(out.objects, dir)
		out.yaml = nil // the objects changed: the YAML is theirs now
	}
	return out, nil
}

// schemas guards kyaml's process-wide OpenAPI schema: builds that use
// the built-in one share it; a build that sets its own has it alone.
var schemas sync.RWMutex

// builtinSchema is what kyaml says of its schema when no kustomization
// set one.
var builtinSchema = openapi.GetSchemaVersion()

// schemaBuild runs a kustomize build with kyaml's process-wide OpenAPI
// schema as a kustomize process of its own would have it. A
// kustomization's `openapi` field (the root's, or a base's: kustomize
// takes the first it loads) replaces the schema for the rest of the
// process, and a schema set after the built-in one was parsed is merged
// into it, not put in its place: so a build that sets one (own, or seen
// set when it ends) runs alone, from no schema parsed, and the schema is
// dropped after. A build that ran beside one that set a schema sees it
// set when it ends (the schema cannot be dropped while it runs), and
// runs again, alone.
func schemaBuild(own bool, build func() (resmap.ResMap, error)) (resmap.ResMap, error) {
	if !own {
		schemas.RLock()
		m, err := build()
		set := openapi.GetSchemaVersion() != builtinSchema
		schemas.RUnlock()
		if !set {
			return m, err
		}
	}
	schemas.Lock()
	defer func() {
		openapi.ResetOpenAPI()
		schemas.Unlock()
	}()
	openapi.ResetOpenAPI()
	return build()
}

// ownSchema reports whether the kustomization in dir names an OpenAPI
// schema (kustomize reads only the root's).
func ownSchema(fsys source.FS, dir string) bool {
	for _, n := range kustomizationFiles {
		data, err := fsys.ReadFile(path.Join(dir, n))
		if err != nil {
			continue
		}
		var k struct {
			OpenAPI map[string]any `yaml:"openapi"`
		}
		goyaml.Unmarshal(data, &k)
		return len(k.OpenAPI) > 0
	}
	return false
}

// restrictorError is kustomize's message for a file outside the
// kustomization's folder.
var restrictorError = regexp.MustCompile(`security; file '([^']*)' is not in or below '([^']*)'`)

// explainRestrictor rewrites kustomize's load restrictor error in the
// words of the source tree: which file, which symbolic link, where it
// points.
func explainRestrictor(err error, fsys source.FS) error {
	m := restrictorError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	file, root := rel(m[1]), rel(m[2])
	if r, rerr := source.Resolve(fsys, file); rerr == nil && r.Linked() {
		return fmt.Errorf("%s is a symbolic link to %q (%s), outside the kustomization's folder %s: kustomize loads no file from outside it", file, r.Target, r.Path, root)
	}
	return fmt.Errorf("%s is outside the kustomization's folder %s: kustomize loads no file from outside it (render.kustomize.loadRestrictor: none allows files elsewhere in the source)", file, root)
}

// originAnnotation is where kustomize records each object's file when the
// kustomization asks for buildMetadata: [originAnnotations].
const originAnnotation = "config.kubernetes.io/origin"

// readOrigins reads each object's origin annotation (which kustomizeFS
// asked for) and removes it again unless the kustomization itself wants
// it, so the output is what `kustomize build` gives.
func (k *kustomizeFS) readOrigins(objs []*yaml.RNode, dir string) []string {
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
