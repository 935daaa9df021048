package pin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
)

// podSpecPaths are where each workload kind keeps its pod spec.
var podSpecPaths = map[string][]string{
	"Pod":                   {"spec"},
	"PodTemplate":           {"template", "spec"},
	"Deployment":            {"spec", "template", "spec"},
	"StatefulSet":           {"spec", "template", "spec"},
	"DaemonSet":             {"spec", "template", "spec"},
	"ReplicaSet":            {"spec", "template", "spec"},
	"ReplicationController": {"spec", "template", "spec"},
	"Job":                   {"spec", "template", "spec"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template", "spec"},
}

var containerLists = []string{"initContainers", "containers", "ephemeralContainers"}

// imageField is one image value in one object.
type imageField struct {
	node *yaml.Node
	obj  *yaml.RNode
}

// Images returns every container image reference of the objects, with
// the node that holds it.
func images(objs []*yaml.RNode) []imageField {
	var out []imageField
	for _, o := range objs {
		p, ok := podSpecPaths[o.GetKind()]
		if !ok {
			continue
		}
		spec, err := o.Pipe(yaml.Lookup(p...))
		if err != nil || spec == nil {
			continue
		}
		for _, list := range containerLists {
			cs := spec.Field(list)
			if cs == nil || cs.Value.YNode().Kind != yaml.SequenceNode {
				continue
			}
			for _, c := range cs.Value.YNode().Content {
				img := yaml.NewRNode(c).Field("image")
				if img != nil && img.Value.YNode().Kind == yaml.ScalarNode && img.Value.YNode().Value != "" {
					out = append(out, imageField{node: img.Value.YNode(), obj: o})
				}
			}
		}
	}
	return out
}

// Images lists the distinct image references the objects' pod specs name,
// sorted.
func Images(objs []*yaml.RNode) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range images(objs) {
		if !seen[f.node.Value] {
			seen[f.node.Value] = true
			out = append(out, f.node.Value)
		}
	}
	sort.Strings(out)
	return out
}

// errTagNotFound says a rule's tag does not exist.
var errTagNotFound = errors.New("not found")

// Pinner resolves image rules against registries.
type Pinner struct {
	Registry *registry.Client
	// Commit is the source commit, the tag of the sourceCommit strategy.
	Commit string
	// Verify checks the signature a rule's verify asks for of the digest
	// resolved, and says whose it is ("key of Secret ci-cosign", "keyless,
	// <identity> (issuer <issuer>)"); nil refuses such rules.
	Verify func(ctx context.Context, rule v1alpha1.ImageRule, repo, digest string) (string, error)
}

// Resolve pins one reference as written under a rule.
func (p *Pinner) Resolve(ctx context.Context, from string, rule v1alpha1.ImageRule) (v1alpha1.PinnedImage, error) {
	ref := ParseRef(from)
	out := v1alpha1.PinnedImage{Name: ref.Repo, From: from}
	var tag string
	switch rule.Strategy {
	case v1alpha1.StrategyMutableTag, "":
		tag = rule.Tag
		if tag == "" {
			tag = ref.Tag
		}
		if tag == "" {
			tag = "latest"
		}
	case v1alpha1.StrategySourceCommit:
		if p.Commit == "" {
			return out, fmt.Errorf("image %s: strategy sourceCommit needs a source commit, and this source has none", ref.Repo)
		}
		tag = p.Commit
		if rule.TagLength > 0 && rule.TagLength < len(tag) {
			tag = tag[:rule.TagLength]
		}
	case v1alpha1.StrategySemver:
		tags, err := p.Registry.Tags(ctx, ref.Repo)
		if err != nil {
			return out, fmt.Errorf("image %s: listing tags: %w", ref.Repo, err)
		}
		if tag, err = registry.Highest(tags, rule.Constraint); err != nil {
			return out, fmt.Errorf("image %s: %w among its tags", ref.Repo, err)
		}
	default:
		return out, fmt.Errorf("image %s: unknown strategy %q", ref.Repo, rule.Strategy)
	}
	digest, err := p.Registry.Digest(ctx, ref.Repo+":"+tag)
	if errors.Is(err, registry.ErrNotFound) {
		return out, fmt.Errorf("image %s: tag %q %w", ref.Repo, tag, errTagNotFound)
	}
	if err != nil {
		return out, fmt.Errorf("image %s:%s: %w", ref.Repo, tag, err)
	}
	if rule.Verify != nil {
		if p.Verify == nil {
			return out, fmt.Errorf("image %s:%s: verify: no trusted keys to check its signature with", ref.Repo, tag)
		}
		by, err := p.Verify(ctx, rule, ref.Repo, digest)
		if err != nil {
			return out, fmt.Errorf("image %s:%s (%s) is not pinned: %w", ref.Repo, tag, digest, err)
		}
		out.Verified = rule.Verify.Provider + " " + by
	}
	out.Tag, out.Digest = tag, digest
	return out, nil
}

// ResolveRules pins one reference under the first rule that matches it
// and resolves: an Optional rule whose tag does not exist gives way to the
// next. ok is false when no rule applies (the reference stays as written).
func (p *Pinner) ResolveRules(ctx context.Context, from string, rules []v1alpha1.ImageRule) (pi v1alpha1.PinnedImage, ok bool, err error) {
	repo := ParseRef(from).Repo
	for len(rules) > 0 {
		i := matchIndex(rules, repo)
		if i < 0 {
			return pi, false, nil
		}
		pi, err = p.Resolve(ctx, from, rules[i])
		if err != nil && rules[i].Optional && errors.Is(err, errTagNotFound) {
			rules = rules[i+1:]
			continue
		}
		return pi, err == nil, err
	}
	return pi, false, nil
}

// Pin rewrites, in place, every container image of the objects that a
// rule matches, and returns what it pinned, sorted. References that no
// rule matches stay as written. Look-ups run in parallel; all failures
// are reported together.
func (p *Pinner) Pin(ctx context.Context, objs []*yaml.RNode, rules []v1alpha1.ImageRule) ([]v1alpha1.PinnedImage, error) {
	fields := images(objs)
	pinned := map[string]v1alpha1.PinnedImage{}
	var mu sync.Mutex
	var errs []error
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, from := range Images(objs) {
		if _, ok := Match(rules, ParseRef(from).Repo); !ok {
			continue
		}
		g.Go(func() error {
			pi, ok, err := p.ResolveRules(gctx, from, rules)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			if ok {
				pinned[from] = pi
			}
			return nil
		})
	}
	g.Wait()
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return nil, errors.Join(errs...)
	}
	for _, f := range fields {
		if pi, ok := pinned[f.node.Value]; ok {
			f.node.Value = pi.Ref()
			f.node.Style = 0
		}
	}
	out := make([]v1alpha1.PinnedImage, 0, len(pinned))
	for _, pi := range pinned {
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out, nil
}
