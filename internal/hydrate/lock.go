package hydrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
	"sluice.dev/sluice/internal/destination"
)

// ErrNotLocked says a folder holds no takeover lock of the owner named.
var ErrNotLocked = errors.New("not locked")

// ExtendLock moves the expiry of owner's takeover lock on a sync's folder
// to until, in one commit that changes nothing else: the folder as it is
// at the branch's tip, its provenance's takeover.expires rewritten. A
// folder someone else wrote meanwhile is read again, never overwritten.
func ExtendLock(ctx context.Context, ms config.ManifestSync, o Options, owner string, until time.Time) (string, error) {
	d := ms.Spec.Destination
	if d.Mode == v1alpha1.ModeBranch {
		return "", fmt.Errorf("%s writes review branches: its folders hold no lock", ms.Name)
	}
	expires := until.UTC().Format(time.RFC3339)
	if d.IsOCI() {
		return extendArtifactLock(ctx, ms, o, owner, expires)
	}
	repo, err := openDestinationRepo(ctx, ms, o)
	if err != nil {
		return "", err
	}
	folder := strings.Trim(path.Clean(d.Path), "/")
	res, err := destination.Write(ctx, repo, d.Branch, nil, destination.WriteOptions{
		Author:  o.Author,
		Signer:  o.signerOf(ms),
		Message: fmt.Sprintf("extend %s's takeover of %s until %s", owner, folder, expires),
		Edit: func(b *destination.Branch) ([]destination.Change, error) {
			files, err := b.ReadFolder(folder)
			if err != nil {
				return nil, err
			}
			data, ok := files[v1alpha1.ProvenanceFile]
			if !ok {
				return nil, fmt.Errorf("%s on %s has no %s: %w", folder, d.Branch, v1alpha1.ProvenanceFile, ErrNotLocked)
			}
			p, err := parseProvenance(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path.Join(folder, v1alpha1.ProvenanceFile), err)
			}
			if p.Takeover == nil || p.Takeover.Owner != owner {
				holder := "nobody"
				if p.Takeover != nil {
					holder = p.Takeover.Owner
				}
				return nil, fmt.Errorf("%s on %s is held by %s, not %s: %w", folder, d.Branch, holder, owner, ErrNotLocked)
			}
			if files[v1alpha1.ProvenanceFile], err = setExpires(data, expires); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Join(folder, v1alpha1.ProvenanceFile), err)
			}
			return []destination.Change{{Path: folder, Files: files}}, nil
		},
	})
	if errors.Is(err, destination.ErrNoChange) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return res.Commit.String(), nil
}

// setExpires rewrites takeover.expires of a provenance record, keeping
// every other byte's meaning and the record's layout.
func setExpires(data []byte, expires string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("empty record")
	}
	takeover := mapValue(doc.Content[0], "takeover")
	v := mapValue(takeover, "expires")
	if v == nil {
		return nil, errors.New("no takeover.expires")
	}
	v.Value, v.Tag, v.Style = expires, "!!str", 0
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
