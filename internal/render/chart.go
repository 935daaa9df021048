package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/source"
)

// helmChartLayer is the media type of a chart's archive in an OCI
// artifact.
const helmChartLayer = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

// Charts fetches remote charts, from OCI registries and from https chart
// repositories, and keeps their archives in a cache directory by digest.
type Charts struct {
	// Registry reaches OCI registries.
	Registry *registry.Client
	// HTTP fetches chart repository indexes and archives; the default is
	// http.DefaultClient.
	HTTP *http.Client
	// CacheDir keeps fetched archives; empty means no cache.
	CacheDir string
}

// Resolve finds the version (highest matching, for a range) and the
// digest of a remote chart without downloading it.
func (c *Charts) Resolve(ctx context.Context, ref v1alpha1.HelmChart) (v1alpha1.PinnedChart, error) {
	pinned, _, err := c.resolve(ctx, ref)
	return pinned, err
}

// chartSource says where the archive of a resolved chart is.
type chartSource struct {
	url string // https archive URL, or "" for OCI
	oci string // OCI reference by digest
}

func (c *Charts) resolve(ctx context.Context, ref v1alpha1.HelmChart) (v1alpha1.PinnedChart, chartSource, error) {
	p := v1alpha1.PinnedChart{Repo: ref.Repo, Name: ref.Name}
	if strings.HasPrefix(ref.Repo, "oci://") {
		repoName := strings.TrimSuffix(strings.TrimPrefix(ref.Repo, "oci://"), "/") + "/" + ref.Name
		version := ref.Version
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v")); err != nil {
			tags, err := c.Registry.Tags(ctx, repoName)
			if err != nil {
				return p, chartSource{}, err
			}
			// OCI tags cannot hold "+": Helm writes it as "_".
			for i := range tags {
				tags[i] = strings.ReplaceAll(tags[i], "_", "+")
			}
			if version, err = registry.Highest(tags, ref.Version); err != nil {
				return p, chartSource{}, fmt.Errorf("chart %s: %w", repoName, err)
			}
		}
		digest, err := c.Registry.Digest(ctx, repoName+":"+strings.ReplaceAll(version, "+", "_"))
		if err != nil {
			return p, chartSource{}, fmt.Errorf("chart %s version %s: %w", repoName, version, err)
		}
		if !validDigest(digest) {
			return p, chartSource{}, fmt.Errorf("chart %s version %s: the registry gives %q, which is not a sha256 digest", repoName, version, digest)
		}
		p.Version, p.Digest = version, digest
		return p, chartSource{oci: repoName + "@" + digest}, nil
	}
	idx, err := c.index(ctx, ref.Repo)
	if err != nil {
		return p, chartSource{}, err
	}
	cv, err := idx.get(ref.Name, ref.Version)
	if err != nil {
		return p, chartSource{}, fmt.Errorf("chart %s version %s in %s: %w", ref.Name, ref.Version, ref.Repo, err)
	}
	if len(cv.URLs) == 0 {
		return p, chartSource{}, fmt.Errorf("chart %s %s in %s: no download URL", ref.Name, cv.Version, ref.Repo)
	}
	u, err := resolveURL(ref.Repo, cv.URLs[0])
	if err != nil {
		return p, chartSource{}, err
	}
	p.Version = cv.Version
	if cv.Digest != "" {
		// The index is the repository's word, not ours: a digest that is
		// not one (a path, say) must not become a file name.
		d := "sha256:" + strings.TrimPrefix(cv.Digest, "sha256:")
		if !validDigest(d) {
			return p, chartSource{}, fmt.Errorf("chart %s %s in %s: the index gives %q, which is not a sha256 digest", ref.Name, cv.Version, ref.Repo, cv.Digest)
		}
		p.Digest = d
	}
	return p, chartSource{url: u}, nil
}

// Archive resolves a remote chart and returns its archive (a .tgz), from
// the cache or downloaded.
func (c *Charts) Archive(ctx context.Context, ref v1alpha1.HelmChart) ([]byte, v1alpha1.PinnedChart, error) {
	pinned, src, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, pinned, err
	}
	if data, ok := c.cached(pinned.Digest, src.oci == ""); ok {
		return data, pinned, nil
	}
	var data []byte
	if src.oci != "" {
		data, err = c.pullOCI(ctx, src.oci)
	} else {
		data, err = c.get(ctx, src.url)
	}
	if err != nil {
		return nil, pinned, err
	}
	sum := sha256.Sum256(data)
	got := "sha256:" + hex.EncodeToString(sum[:])
	if src.oci == "" {
		if pinned.Digest != "" && pinned.Digest != got {
			return nil, pinned, fmt.Errorf("chart %s %s: archive digest %s does not match the index's %s", ref.Name, pinned.Version, got, pinned.Digest)
		}
		pinned.Digest = got
	}
	c.store(pinned.Digest, data)
	return data, pinned, nil
}

func (c *Charts) pullOCI(ctx context.Context, ref string) ([]byte, error) {
	r, err := c.Registry.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	img, err := c.Registry.Image(ctx, r)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	for _, l := range m.Layers {
		if string(l.MediaType) != helmChartLayer {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, err
		}
		rc, err := layer.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, maxChartDownload+1))
		if err == nil && len(data) > maxChartDownload {
			err = fmt.Errorf("%s: the chart's archive is larger than %d MiB", ref, maxChartDownload>>20)
		}
		return data, err
	}
	return nil, fmt.Errorf("%s is not a Helm chart: no layer of type %s", ref, helmChartLayer)
}

// chartIndex is the part of a chart repository's index.yaml Sluice reads.
type chartIndex struct {
	Entries map[string][]chartVersion `json:"entries"`
}

type chartVersion struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	URLs    []string `json:"urls"`
	Digest  string   `json:"digest"`
}

// get finds a chart's version: the exact one, or the highest that a
// range allows.
func (idx *chartIndex) get(name, version string) (chartVersion, error) {
	versions := idx.Entries[name]
	if len(versions) == 0 {
		return chartVersion{}, fmt.Errorf("no chart named %s", name)
	}
	for _, v := range versions {
		if v.Version == version || "v"+v.Version == version {
			return v, nil
		}
	}
	tags := make([]string, len(versions))
	for i, v := range versions {
		tags[i] = v.Version
	}
	best, err := registry.Highest(tags, version)
	if err != nil {
		return chartVersion{}, err
	}
	for _, v := range versions {
		if v.Version == best {
			return v, nil
		}
	}
	return chartVersion{}, fmt.Errorf("no version %s", version)
}

func (c *Charts) index(ctx context.Context, repoURL string) (*chartIndex, error) {
	data, err := c.get(ctx, strings.TrimSuffix(repoURL, "/")+"/index.yaml")
	if err != nil {
		return nil, err
	}
	idx := &chartIndex{}
	if err := sigsyaml.Unmarshal(data, idx); err != nil {
		return nil, fmt.Errorf("chart repository %s: index.yaml: %w", repoURL, err)
	}
	return idx, nil
}

func (c *Charts) get(ctx context.Context, u string) ([]byte, error) {
	return httpGet(ctx, c.HTTP, u, maxChartDownload)
}

// maxChartDownload bounds a chart archive or a repository index: the
// largest public indexes are tens of megabytes.
const maxChartDownload = 128 << 20

// digestPattern is a sha256 digest, the only form a cached archive is
// named by.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func validDigest(d string) bool { return digestPattern.MatchString(d) }

// cachePath is where an archive of this digest is kept: a name made of
// the digest's hex alone, inside the cache directory.
func (c *Charts) cachePath(digest string) (string, bool) {
	if c.CacheDir == "" || !validDigest(digest) {
		return "", false
	}
	return filepath.Join(c.CacheDir, "sha256-"+strings.TrimPrefix(digest, "sha256:")+".tgz"), true
}

// cached returns a kept archive. An https chart's digest is its
// archive's, and is checked; an OCI chart's is its manifest's, which only
// names it.
func (c *Charts) cached(digest string, verify bool) ([]byte, bool) {
	p, ok := c.cachePath(digest)
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	// A cached archive is what its name says, or it is not used.
	if sum := sha256.Sum256(data); verify && "sha256:"+hex.EncodeToString(sum[:]) != digest {
		return nil, false
	}
	return data, true
}

func (c *Charts) store(digest string, data []byte) {
	if p, ok := c.cachePath(digest); ok {
		source.WriteFile(p, data)
	}
}

func resolveURL(base, ref string) (string, error) {
	b, err := url.Parse(strings.TrimSuffix(base, "/") + "/")
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}
