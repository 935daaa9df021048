package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing/fstest"

	"sluice.dev/sluice/internal/egress"
	"sluice.dev/sluice/internal/source"
)

// Base is a remote kustomize base as opened: its repository's tree and
// the base's folder in it.
type Base struct {
	FS  source.FS
	Dir string
	// ID says what was read (repository and commit), for provenance.
	ID string
}

// GitBases returns an opener of the remote git bases kustomizations name
// ("https://host/org/repo//path?ref=v1"), reading them in process through
// cache: no git binary runs. mapRepo, if set, may point a base's
// repository and ref elsewhere (a takeover's working tree, a RepoConfig's
// branch) before it is opened. A base written in a source must name a
// remote repository: a local path or file:// URL would let a repository
// read this machine's disk.
func GitBases(cache *source.Cache, mapRepo func(repo, ref string) (string, string, error)) func(context.Context, string) (*Base, error) {
	return func(ctx context.Context, raw string) (*Base, error) {
		repo, ref, dir, err := ParseRemoteBase(raw)
		if err != nil {
			return nil, err
		}
		loc, err := source.ParseLocation(repo, "/")
		if err != nil {
			return nil, err
		}
		if loc.IsLocal() {
			return nil, fmt.Errorf("a base in a source must name a remote repository (https, ssh), not this machine's disk")
		}
		if mapRepo != nil {
			if repo, ref, err = mapRepo(repo, ref); err != nil {
				return nil, err
			}
		}
		o, err := cache.OpenSource(ctx, repo, ref, "")
		if err != nil {
			return nil, err
		}
		if dir == "" {
			dir = "."
		}
		if _, err := o.FS.Stat(dir); err != nil {
			return nil, fmt.Errorf("%s has no folder %s", o.Describe(), dir)
		}
		return &Base{FS: o.FS, Dir: dir, ID: o.Describe()}, nil
	}
}

// ParseRemoteBase splits a kustomize remote base into repository, ref and
// folder, in the forms kustomize reads: "https://host/org/repo//dir?ref=v1",
// "https://host/org/repo.git/dir", "host/org/repo/dir?ref=v1" (two path
// segments name the repository), "git@host:org/repo.git/dir",
// "ssh://git@host/org/repo.git//dir" and "file:///abs/repo//dir".
func ParseRemoteBase(raw string) (repo, ref, dir string, err error) {
	s := strings.TrimPrefix(raw, "git::")
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
	if rest, ok := strings.CutPrefix(s, "gh:"); ok {
		s = "github.com/" + rest
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

// FetchFiles returns a fetcher of the remote files kustomizations name
// (an http(s) URL of one YAML or JSON file), through client (nil: one
// whose connections obey the egress policy of the request's context),
// each read within the render's file limit. No credentials are sent.
func FetchFiles(client *http.Client) func(ctx context.Context, u string, max int64) ([]byte, error) {
	return func(ctx context.Context, u string, max int64) ([]byte, error) {
		data, err := httpGet(ctx, client, u, max)
		if errors.Is(err, errTooLarge) {
			return nil, &LimitError{What: "remote file " + source.Redact(u), Max: bytesString(max) + " per file", Flag: FlagFileBytes}
		}
		return data, err
	}
}

// errTooLarge is a download past its bound.
var errTooLarge = errors.New("larger than allowed")

// httpGet downloads u whole, or fails with errTooLarge past max bytes.
func httpGet(ctx context.Context, client *http.Client, u string, max int64) ([]byte, error) {
	if client == nil {
		client = &http.Client{Transport: egress.ByContext{}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", source.Redact(u), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("GET %s: %w (%d MiB)", source.Redact(u), errTooLarge, max>>20)
	}
	return data, nil
}

// memFS is one fetched file as a source tree.
type memFS struct{ fstest.MapFS }

func newMemFile(name string, data []byte) memFS {
	return memFS{fstest.MapFS{name: {Data: data, Mode: 0o644}}}
}

func (m memFS) Hash(name string) (string, error) {
	data, err := m.MapFS.ReadFile(name)
	if err != nil {
		return "", err
	}
	return source.BlobHash(data), nil
}

// remoteFileName is the name a fetched file gets in its tree: the URL's
// last segment, which says whether it is YAML or JSON.
func remoteFileName(u string) string {
	if p, err := url.Parse(u); err == nil {
		if b := path.Base(p.Path); b != "" && b != "/" && b != "." {
			return b
		}
	}
	return "resource.yaml"
}
