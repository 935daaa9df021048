package config

import (
	"fmt"
	"strings"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// FromManifestSync is a ManifestSync resource of a cluster as the engines
// take it: defaulted and validated as a file would be. Unless allowLocal,
// it refuses repositories on this machine's disk: a resource anybody may
// create must not read a controller's files.
func FromManifestSync(obj *v1alpha1.ManifestSync, allowLocal bool) (ManifestSync, error) {
	c := obj.DeepCopy()
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		return ManifestSync{}, errs.ToAggregate()
	}
	for field, repo := range map[string]string{"spec.source.repo": c.Spec.Source.Repo, "spec.destination.repo": c.Spec.Destination.Repo} {
		if field == "spec.destination.repo" && c.Spec.Destination.IsOCI() {
			continue // a registry: reached through the registry client's egress
		}
		if err := RemoteOnly(field, repo, allowLocal); err != nil {
			return ManifestSync{}, err
		}
	}
	return ManifestSync{ManifestSync: c, Origin: Origin{File: "ManifestSync " + obj.Namespace + "/" + obj.Name}}, nil
}

// RemoteOnly refuses a repository on this machine's disk, unless
// allowLocal (a file:// URL or an absolute path, then).
func RemoteOnly(field, repo string, allowLocal bool) error {
	loc, err := source.ParseLocation(repo, "/")
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if !loc.IsLocal() {
		return nil
	}
	if allowLocal && (strings.HasPrefix(repo, "file://") || strings.HasPrefix(repo, "/")) {
		return nil
	}
	return fmt.Errorf("%s: %q is a path on the controller's disk: the controller reads remote repositories only (https, ssh)", field, repo)
}
