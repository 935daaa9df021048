package owner

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/sourceignore/gitignore"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/internal/source"
)

// sourceIgnore reads the source's spec.ignore (GitRepository, Bucket,
// OCIRepository): patterns source-controller adds to the .sourceignore
// files' when it builds the artifact. "" when there is none or the
// source cannot be read (it is then as if unset).
func sourceIgnore(ctx context.Context, kube client.Client, ref fluxSourceRef) string {
	if kube == nil || ref.Kind == "" || ref.Name == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	u.SetKind(ref.Kind)
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(u.Object, "spec", "ignore")
	return s
}

// ignoreMatcher is what source-controller leaves out of the artifact of
// the tree in fsys: every .sourceignore file's patterns (each scoped to
// its folder), then the source's spec.ignore, later patterns overruling
// earlier ones as in .gitignore; without any, its default exclusions.
// Paths are matched relative to the tree's root, the source's root.
func ignoreMatcher(fsys source.FS, specIgnore string) (gitignore.Matcher, error) {
	var ps []gitignore.Pattern
	err := source.Walk(context.Background(), fsys, ".", source.WalkOptions{}, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if d.IsDir() || d.Name() != sourceignore.IgnoreFile {
			return nil
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			return err
		}
		var domain []string
		if dir := path.Dir(p); dir != "." {
			domain = strings.Split(dir, "/")
		}
		ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(string(data)), domain)...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if specIgnore != "" {
		ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(specIgnore), nil)...)
	}
	if len(ps) == 0 {
		return sourceignore.NewDefaultMatcher(nil, nil), nil
	}
	// As source-controller's archive filter: patterns of its own replace
	// the default exclusions (CI files, images, .sops.yaml), all but
	// git's.
	return sourceignore.NewMatcher(append(sourceignore.VCSPatterns(nil), ps...)), nil
}
