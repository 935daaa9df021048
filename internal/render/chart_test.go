package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/registry"
	"sluice.dev/sluice/internal/testenv"
)

// packageChart packages testdata/repo/chart at a version, as `helm
// package` would.
func packageChart(t *testing.T, version string) []byte {
	t.Helper()
	ch, err := loader.LoadDir("testdata/repo/chart")
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Version = version
	dir := t.TempDir()
	p, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func pushChartOCI(t *testing.T, reg *testenv.Registry, name, version string) string {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, "application/vnd.cncf.helm.config.v1+json")
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(packageChart(t, version), helmChartLayer), MediaType: helmChartLayer})
	if err != nil {
		t.Fatal(err)
	}
	return reg.PushImage(t, "charts/"+name+":"+version, img)
}

func TestRemoteChartFromOCIRegistry(t *testing.T) {
	reg := testenv.NewRegistry(t)
	pushChartOCI(t, reg, "shop", "1.2.0")
	want := pushChartOCI(t, reg, "shop", "1.3.0")
	pushChartOCI(t, reg, "shop", "2.0.0")
	charts := &Charts{Registry: registry.New(), CacheDir: t.TempDir()}
	s := &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ReleaseName: "r", Chart: &v1alpha1.HelmChart{
		Repo: "oci://" + reg.Host + "/charts", Name: "shop", Version: ">=1.2.0 <2.0.0",
	}}}
	res, err := Render(context.Background(), mapFS{"x/.keep": ""}.fs(), "x", Options{Render: s, Charts: charts})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chart == nil || res.Chart.Version != "1.3.0" || res.Chart.Digest != want {
		t.Errorf("chart = %+v, want 1.3.0 %s", res.Chart, want)
	}
	if len(objects(t, res)) != 3 {
		t.Errorf("objects = %v", ids(objects(t, res)))
	}
	again, err := charts.Resolve(context.Background(), *s.Helm.Chart)
	if err != nil || again != *res.Chart {
		t.Errorf("Resolve = %+v, %v", again, err)
	}
}

func TestRemoteChartFromHTTPSRepository(t *testing.T) {
	tgz := packageChart(t, "0.4.0")
	sum := sha256.Sum256(tgz)
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	mux.HandleFunc("/stable/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "apiVersion: v1\nentries:\n  shop:\n  - name: shop\n    version: 0.4.0\n    digest: %s\n    urls: [shop-0.4.0.tgz]\n  - name: shop\n    version: 0.3.0\n    urls: [shop-0.3.0.tgz]\n", hex.EncodeToString(sum[:]))
	})
	mux.HandleFunc("/stable/shop-0.4.0.tgz", func(w http.ResponseWriter, r *http.Request) { w.Write(tgz) })
	cache := t.TempDir()
	charts := &Charts{Registry: registry.New(), HTTP: srv.Client(), CacheDir: cache}
	s := &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ReleaseName: "r", ValuesFiles: []string{"values-extra.yaml"}, Chart: &v1alpha1.HelmChart{
		Repo: srv.URL + "/stable", Name: "shop", Version: "0.4.0",
	}}}
	fsys := mapFS{"app/values-extra.yaml": "replicaCount: 9\n"}.fs()
	res, err := Render(context.Background(), fsys, "app", Options{Render: s, Charts: charts})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chart.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("digest = %s", res.Chart.Digest)
	}
	found := false
	for _, o := range objects(t, res) {
		if o.GetKind() == "Deployment" && strings.Contains(o.MustString(), "replicas: 9") {
			found = true
		}
	}
	if !found {
		t.Error("values file beside the sync not applied to the remote chart")
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".tgz") {
		t.Errorf("cache holds %v", entries)
	}
	if !strings.Contains(inputPaths(res.Inputs), "app/values-extra.yaml") {
		t.Errorf("values file not an input: %s", inputPaths(res.Inputs))
	}
	_, err = Render(context.Background(), fsys, "app", Options{Render: &v1alpha1.Render{Helm: &v1alpha1.HelmRender{Chart: &v1alpha1.HelmChart{Repo: srv.URL + "/stable", Name: "shop", Version: "9.9.9"}}}, Charts: charts})
	if err == nil || !strings.Contains(err.Error(), "chart shop version 9.9.9") {
		t.Errorf("missing version: %v", err)
	}
	_ = filepath.Join
}

// TestChartIndexCannotNameFilesOutsideTheCache: an index is the chart
// repository's word; a "digest" that is a path names no file.
func TestChartIndexCannotNameFilesOutsideTheCache(t *testing.T) {
	tgz := packageChart(t, "0.4.0")
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "pwn.tgz"), tgz, 0o644) // what the attacker would have us load
	cache := filepath.Join(t.TempDir(), "charts")
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	rel, _ := filepath.Rel(cache, filepath.Join(outside, "pwn"))
	mux.HandleFunc("/stable/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "apiVersion: v1\nentries:\n  shop:\n  - name: shop\n    version: 0.4.0\n    digest: \"sha256:%s\"\n    urls: [shop-0.4.0.tgz]\n", rel)
	})
	mux.HandleFunc("/stable/shop-0.4.0.tgz", func(w http.ResponseWriter, r *http.Request) { w.Write(tgz) })
	charts := &Charts{Registry: registry.New(), HTTP: srv.Client(), CacheDir: cache}
	s := &v1alpha1.Render{Helm: &v1alpha1.HelmRender{ReleaseName: "r", Chart: &v1alpha1.HelmChart{Repo: srv.URL + "/stable", Name: "shop", Version: "0.4.0"}}}
	_, err := Render(context.Background(), mapFS{"app/x": "x"}.fs(), "app", Options{Render: s, Charts: charts})
	if err == nil || !strings.Contains(err.Error(), "which is not a sha256 digest") {
		t.Fatalf("err = %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("the cache holds %v", entries)
	}
}
