package dashboard

import (
	"cmp"
	"net/http"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

// imageRow is an Image and the syncs that pin it.
type imageRow struct {
	Namespace, Name string
	Repository      string
	State, Message  string
	Build           *v1alpha1.ImageBuild
	Pinned          []pin
}

// pin is a sync pinning an Image's repository, at the last build's digest
// or another.
type pin struct {
	Namespace, Name, Tag, Digest string
	Current                      bool
}

type imagesPage struct {
	Title, Nav string
	Images     []imageRow
	Err        string
}

func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	p := imagesPage{Title: "Images", Nav: "images"}
	visible, err := s.visible(r.Context(), s.o.Namespace)
	if err != nil {
		p.Err = actionError(err)
	}
	var imgs v1alpha1.ImageList
	reader := s.reader
	if !s.watchImages {
		reader = s.clients.base.Kube() // lists it as the identity, to say why not
	}
	if err := reader.List(r.Context(), &imgs, client.InNamespace(s.o.Namespace)); err != nil {
		p.Err = listError(err)
	}
	var syncs v1alpha1.ManifestSyncList
	if err := s.reader.List(r.Context(), &syncs, client.InNamespace(s.o.Namespace)); err != nil {
		p.Err = listError(err)
	}
	// Which syncs pin which repository.
	byRepo := map[string][]pin{}
	for i := range syncs.Items {
		ms := &syncs.Items[i]
		if !visible(ms.Namespace) {
			continue
		}
		for _, im := range ms.Status.Images {
			repo := canonical(im.Name)
			byRepo[repo] = append(byRepo[repo], pin{Namespace: ms.Namespace, Name: ms.Name, Tag: im.Tag, Digest: im.Digest})
		}
	}
	for i := range imgs.Items {
		img := &imgs.Items[i]
		if !visible(img.Namespace) {
			continue
		}
		row := imageRow{Namespace: img.Namespace, Name: img.Name, Repository: img.Spec.Image, Build: img.Status.LastBuild, State: StateUnknown}
		if c := meta.FindStatusCondition(img.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			row.Message = c.Message
			switch {
			case img.Spec.Suspend:
				row.State = StateSuspended
			case c.Status == "True":
				row.State = StateReady
			case c.Status == "False":
				row.State = StateFailed
			}
		}
		for _, p := range byRepo[canonical(img.Spec.Image)] {
			p.Current = row.Build != nil && p.Digest == row.Build.Digest
			row.Pinned = append(row.Pinned, p)
		}
		slices.SortFunc(row.Pinned, func(a, b pin) int { return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name)) })
		p.Images = append(p.Images, row)
	}
	slices.SortFunc(p.Images, func(a, b imageRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	s.render(w, r, "images.html", p)
}

// canonical is a repository's full name (index.docker.io/library/nginx
// for nginx), so that the ways of writing one compare equal.
func canonical(repo string) string {
	r, err := name.NewRepository(repo)
	if err != nil {
		return repo
	}
	return r.Name()
}
