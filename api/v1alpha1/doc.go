// Package v1alpha1 holds the sluice.dev/v1alpha1 API: the resources users
// write (ManifestSync and, later, RepoConfig, Image, RunConfig), the
// Provenance record Sluice writes beside every hydrated folder, their
// defaults and their validation. It depends on nothing else of Sluice's.
package v1alpha1
