package hydrate

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"sluice.dev/sluice/internal/render"
)

// openBase opens a remote kustomize base, through the run's repository
// overrides.
func (r *runner) openBase(ctx context.Context, raw string) (*render.Base, error) {
	repo, ref, dir, err := parseRemoteBase(raw)
	if err != nil {
		return nil, err
	}
	if repo, ref, _, err = r.o.Overrides.Repo(repo, ref, ""); err != nil {
		return nil, err
	}
	o, err := r.o.Cache.OpenSource(ctx, repo, ref, "")
	if err != nil {
		return nil, err
	}
	if dir == "" {
		dir = "."
	}
	if _, err := o.FS.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s has no folder %s", o.Describe(), dir)
	}
	return &render.Base{FS: o.FS, Dir: dir, ID: o.Describe()}, nil
}

// parseRemoteBase splits a kustomize remote base into repository, ref and
// folder, in the forms kustomize reads: "https://host/org/repo//dir?ref=v1",
// "https://host/org/repo.git/dir", "host/org/repo/dir?ref=v1" (two path
// segments name the repository), "git@host:org/repo.git/dir",
// "ssh://git@host/org/repo.git//dir" and "file:///abs/repo//dir".
func parseRemoteBase(raw string) (repo, ref, dir string, err error) {
	s := raw
	if i := strings.Index(s, "?"); i >= 0 {
		q, perr := url.ParseQuery(s[i+1:])
		if perr != nil {
			return "", "", "", fmt.Errorf("remote base %q: %w", raw, perr)
		}
		ref = q.Get("ref")
		if ref == "" {
			ref = q.Get("version")
		}
		s = s[:i]
	}
	scheme := ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, s = s[:i+3], s[i+3:]
	}
	switch {
	case strings.Contains(s, "//"):
		i := strings.Index(s, "//")
		repo, dir = s[:i], s[i+2:]
	case strings.Contains(s, ".git/"):
		i := strings.Index(s, ".git/")
		repo, dir = s[:i+4], s[i+5:]
	case strings.HasSuffix(s, ".git"):
		repo = s
	default:
		// host/org/repo[/dir...]: the first two segments after the host.
		parts := strings.Split(s, "/")
		if len(parts) < 3 {
			return "", "", "", fmt.Errorf("remote base %q: cannot tell the repository from the folder: write it as URL//folder", raw)
		}
		repo, dir = strings.Join(parts[:3], "/"), strings.Join(parts[3:], "/")
	}
	if scheme == "" && !strings.HasPrefix(repo, "git@") {
		scheme = "https://"
	}
	return scheme + repo, ref, strings.Trim(dir, "/"), nil
}
