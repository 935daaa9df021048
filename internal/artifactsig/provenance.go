package artifactsig

import (
	"fmt"
	"sort"
	"strings"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// SLSA provenance, as Sluice records a hydration in it.
const (
	// SLSAPredicate is SLSA provenance v1's predicate type (cosign's
	// `--type slsaprovenance1`).
	SLSAPredicate = "https://slsa.dev/provenance/v1"
	// BuildType says how to read the provenance's parameters: a
	// hydration by Sluice.
	BuildType = "https://sluice.dev/hydrate/v1"
	// BuilderID names the builder: Sluice, its version beside.
	BuilderID = "https://sluice.dev/sluice"
)

// Provenance is what an artifact was hydrated from, for its SLSA
// provenance attestation: what a git folder's .sluice.yaml records.
type Provenance struct {
	// Syncs are the ManifestSyncs the artifact holds, each with its
	// folder in the artifact.
	Syncs []SyncProvenance
	// Version is Sluice's.
	Version string
	// Started and Finished bound the hydration.
	Started, Finished time.Time
	// InvocationID identifies the run (the controller's reconcile, a CI
	// job).
	InvocationID string
}

// SyncProvenance is one sync's part of an artifact.
type SyncProvenance struct {
	// Name is NAMESPACE/NAME (NAME on the command line).
	Name string
	// Folder is its folder in the artifact.
	Folder string
	// Repo, Ref and Commit are its source; Paths what it rendered from.
	Repo, Ref, Commit string
	Paths             []string
	// Images are the images it pinned: reference (as written) and digest.
	Images []PinnedImage
	// Render is its render settings (spec.render, the deployer), as JSON
	// values.
	Render map[string]any
	// Record is the folder's provenance record (.sluice.yaml) as a git
	// folder would hold it.
	Record []byte
}

// PinnedImage is an image a sync pinned.
type PinnedImage struct{ Name, Digest string }

// Predicate is the SLSA provenance v1 predicate: the syncs, sources,
// paths and render settings as external parameters; each source commit
// and pinned image as a resolved dependency; Sluice and its version as
// the builder; each sync's record as a byproduct.
func (p Provenance) Predicate() (*structpb.Struct, error) {
	syncs := make([]any, 0, len(p.Syncs))
	var deps, byproducts []*intoto.ResourceDescriptor
	for _, s := range p.Syncs {
		paths := make([]any, len(s.Paths))
		for i, path := range s.Paths {
			paths[i] = path
		}
		sync := map[string]any{"name": s.Name, "folder": s.Folder, "source": map[string]any{"repo": s.Repo, "ref": s.Ref, "commit": s.Commit}, "paths": paths}
		if len(s.Render) > 0 {
			sync["render"] = s.Render
		}
		syncs = append(syncs, sync)
		if s.Commit != "" {
			deps = append(deps, &intoto.ResourceDescriptor{Uri: "git+" + s.Repo, Digest: map[string]string{"gitCommit": s.Commit}, Name: s.Name})
		}
		images := append([]PinnedImage(nil), s.Images...)
		sort.Slice(images, func(i, j int) bool { return images[i].Name < images[j].Name })
		for _, img := range images {
			alg, hex, ok := strings.Cut(img.Digest, ":")
			if !ok {
				return nil, fmt.Errorf("sync %s: image %s: digest %q is not ALGORITHM:HEX", s.Name, img.Name, img.Digest)
			}
			deps = append(deps, &intoto.ResourceDescriptor{Uri: "oci://" + img.Name, Digest: map[string]string{alg: hex}})
		}
		if len(s.Record) > 0 {
			byproducts = append(byproducts, &intoto.ResourceDescriptor{Name: s.Folder + "/.sluice.yaml", Content: s.Record, MediaType: "application/yaml"})
		}
	}
	ext, err := structpb.NewStruct(map[string]any{"syncs": syncs})
	if err != nil {
		return nil, fmt.Errorf("the provenance's parameters: %w", err)
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{BuildType: BuildType, ExternalParameters: ext, ResolvedDependencies: deps},
		RunDetails: &slsa.RunDetails{
			Builder:    &slsa.Builder{Id: BuilderID, Version: map[string]string{"sluice": p.Version}},
			Metadata:   &slsa.BuildMetadata{InvocationId: p.InvocationID},
			Byproducts: byproducts,
		},
	}
	if !p.Started.IsZero() {
		pred.RunDetails.Metadata.StartedOn = timestamppb.New(p.Started)
	}
	if !p.Finished.IsZero() {
		pred.RunDetails.Metadata.FinishedOn = timestamppb.New(p.Finished)
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("the provenance: %w", err)
	}
	raw, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	out := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}
