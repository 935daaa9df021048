package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// SchemeBuilder registers the resources the controller serves.
var SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds sluice.dev/v1alpha1 to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ManifestSync{}, &ManifestSyncList{}, &Image{}, &ImageList{}, &RepoConfig{}, &RepoConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
