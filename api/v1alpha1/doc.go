// Package v1alpha1 holds the sluice.dev/v1alpha1 API: the resources users
// write (ManifestSync, Image, RepoConfig, RunConfig), the Provenance record
// Sluice writes beside every hydrated folder, their defaults and their
// validation. The command line reads them from files; ManifestSync, Image
// and RepoConfig are also the controller's custom resources, their CRDs
// generated from these types (config/crd). It depends on nothing else of
// Sluice's.
//
// +kubebuilder:object:generate=true
// +groupName=sluice.dev
package v1alpha1
