package v1alpha1

import "path"

// Default fills in the defaults the ManifestSync schema documents. It is
// idempotent and leaves fields the user set alone, except that folder paths
// are cleaned ("apps/web/" is "apps/web").
func (s *ManifestSync) Default() {
	if s.APIVersion == "" {
		s.APIVersion = APIVersion
	}
	if s.Kind == "" {
		s.Kind = KindManifestSync
	}
	src := &s.Spec.Source
	src.Path = cleanRel(src.Path)
	if r := s.Spec.Render; r != nil {
		if k := r.Kustomize; k != nil && k.LoadRestrictor == "" {
			k.LoadRestrictor = LoadRestrictorRootOnly
		}
		if h := r.Helm; h != nil && h.ReleaseName == "" {
			h.ReleaseName = s.Name
		}
	}
	for i := range s.Spec.Images {
		if s.Spec.Images[i].Strategy == "" {
			s.Spec.Images[i].Strategy = StrategyMutableTag
		}
	}
	dst := &s.Spec.Destination
	if dst.Repo == "" {
		dst.Repo = src.Repo
	}
	if dst.Path != "" {
		dst.Path = cleanRel(dst.Path)
	}
	if dst.Layout == "" {
		dst.Layout = LayoutPerObject
	}
	if dst.Mode == "" {
		dst.Mode = ModePush
	}
}

// cleanRel cleans a slash-separated relative path; "" becomes ".".
func cleanRel(p string) string {
	if p == "" {
		return "."
	}
	return path.Clean(p)
}

// DestinationSecretRef is the Secret the destination is written with: its
// own, or, when it names none and is the source's repository (named again,
// or left out), the source's. A Secret is never lent to another
// repository.
func (s *ManifestSyncSpec) DestinationSecretRef() *SecretRef {
	if ref := s.Destination.SecretRef; ref != nil {
		return ref
	}
	if s.Destination.Repo == "" || s.Destination.Repo == s.Source.Repo {
		return s.Source.SecretRef
	}
	return nil
}
