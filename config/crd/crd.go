// Package crd holds Sluice's CustomResourceDefinitions (ManifestSync,
// Image, RepoConfig), generated from api/v1alpha1 by `make generate` into
// bases/, and embedded so that the binary can install them.
package crd

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml files/*.yaml
var files embed.FS

// Objects returns the CRDs.
func Objects() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return read("bases/*.yaml")
}

// Described returns the CRDs and the schema of RunConfig, a file of the
// command line that is never installed, in one list: what the API
// reference describes.
func Described() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return read("*/*.yaml")
}

func read(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, pattern)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
