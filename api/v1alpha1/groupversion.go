package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// Group is the API group of every Sluice resource.
const Group = "sluice.dev"

// Version is the API version of this package.
const Version = "v1alpha1"

// GroupVersion is sluice.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// APIVersion is the apiVersion string of this package's resources.
const APIVersion = Group + "/" + Version
