package hydrate

import (
	"context"

	"sluice.dev/sluice/internal/render"
)

// openBase opens a remote kustomize base in process, through the run's
// repository overrides.
func (r *runner) openBase(ctx context.Context, raw string) (*render.Base, error) {
	return render.GitBases(r.o.Cache, func(repo, ref string) (string, string, error) {
		repo, ref, _, err := r.o.Overrides.Repo(repo, ref, "")
		return repo, ref, err
	})(ctx, raw)
}
