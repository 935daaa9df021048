package ociartifact

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/testenv"
)

var cp *testenv.ControlPlane

func TestMain(m *testing.M) { testenv.RunWithControlPlane(m, &cp) }

// The real Flux deploys what Sluice packs: source-controller's
// OCIRepository pulls the artifact from the registry and
// kustomize-controller applies the folder of it a Kustomization names;
// a new push of the tag is applied in turn, and the artifact's origin is
// what source-controller records.
func TestFluxDeploysThePackedArtifact(t *testing.T) {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns, fluxNS := testenv.Namespace("oci-apps"), testenv.Namespace("oci-flux")
	for _, n := range []string{ns, fluxNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta(n)}); err != nil {
			t.Fatal(err)
		}
	}
	reg := testenv.NewRegistry(t)
	tag := tagOf(t, reg, "team/deploy:dev")
	files := map[string][]byte{
		"apps/web/configmap-web.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: blue}\n"),
		"apps/api/configmap-api.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api}\ndata: {tier: back}\n"),
	}
	img, _ := Pack(files, meta)
	res, err := Push(ctx, tag, img, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(strings.NewReplacer("FLUXNS", fluxNS, "NS", ns, "URL", "oci://"+reg.Host+"/team/deploy").Replace(`apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata: {name: deploy, namespace: FLUXNS}
spec:
  interval: 1s
  url: URL
  ref: {tag: dev}
  insecure: true
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: web, namespace: FLUXNS}
spec:
  interval: 1s
  retryInterval: 1s
  prune: true
  path: ./apps/web
  targetNamespace: NS
  sourceRef: {kind: OCIRepository, name: deploy}
`), "---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	f := testenv.StartFlux(t, cp.Kubeconfig, fluxNS)
	f.WaitApplied(t, c, "web", "dev@"+res.Digest.String())
	color := func() string {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, cm); err != nil {
			return fmt.Sprint(err)
		}
		return cm.Data["color"]
	}
	if got := color(); got != "blue" {
		t.Fatalf("the applied ConfigMap says %q", got)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, &corev1.ConfigMap{}); err == nil {
		t.Errorf("the Kustomization of apps/web applied apps/api too")
	}
	// What source-controller recorded of the artifact: Sluice's origin.
	repo := &unstructured.Unstructured{}
	repo.SetAPIVersion("source.toolkit.fluxcd.io/v1")
	repo.SetKind("OCIRepository")
	if err := c.Get(ctx, client.ObjectKey{Namespace: fluxNS, Name: "deploy"}, repo); err != nil {
		t.Fatal(err)
	}
	recorded, _, _ := unstructured.NestedStringMap(repo.Object, "status", "artifact", "metadata")
	if recorded[AnnotationSource] != meta.Source || recorded[AnnotationRevision] != meta.Revision {
		t.Errorf("source-controller recorded the artifact's origin as %v", recorded)
	}

	files["apps/web/configmap-web.yaml"] = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: green}\n")
	img2, _ := Pack(files, meta)
	res2, err := Push(ctx, tag, img2, PushOptions{})
	if err != nil || !res2.Pushed {
		t.Fatalf("second push: %+v %v", res2, err)
	}
	f.WaitApplied(t, c, "web", "dev@"+res2.Digest.String())
	deadline := time.Now().Add(30 * time.Second)
	for color() != "green" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := color(); got != "green" {
		t.Errorf("after the second push the ConfigMap says %q", got)
	}
}

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// Argo CD reads the same artifact: its own OCI client (the repo-server's
// default allowed layer media types) pulls and extracts it, and its
// manifest generation renders the Application's folder of it as a
// directory source. An artifact whose layer is Flux's own content media
// type is refused by that default, which is why Sluice uses the standard
// one.
func TestArgoCDReadsThePackedArtifact(t *testing.T) {
	reg := testenv.NewRegistry(t)
	img, _ := Pack(map[string][]byte{
		"apps/web/configmap-web.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: blue}\n"),
		"apps/web/.sluice.yaml":       []byte("# +argocd:skip-file-rendering\napiVersion: sluice.dev/v1alpha1\nkind: Provenance\nsync: web\n"),
		"apps/api/configmap-api.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: api}\n"),
	}, meta)
	res, err := Push(context.Background(), tagOf(t, reg, "team/deploy:dev"), img, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	app := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  project: default
  source: {repoURL: "oci://HOST/team/deploy", targetRevision: dev, path: apps/web}
  destination: {server: "https://kubernetes.default.svc", namespace: web}
`
	out, err := testenv.ArgoManifestsOCI(t, strings.ReplaceAll(app, "HOST", reg.Host))
	if err != nil {
		t.Fatalf("Argo CD could not read the artifact %s: %v", res.Digest, err)
	}
	if !strings.Contains(out, "name: web") || !strings.Contains(out, "color: blue") || strings.Contains(out, "name: api") || strings.Contains(out, "Provenance") {
		t.Errorf("Argo CD generated from the artifact:\n%s", out)
	}

	// Flux's own content media type: not in the repo-server's default list.
	fluxTyped := imageOf(t, "application/vnd.cncf.flux.content.v1.tar+gzip", layerOf(t, []entry{{name: "apps/web/cm.yaml", typ: '0', data: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n"}}))
	reg.PushImage(t, "team/flux-typed:dev", fluxTyped)
	_, err = testenv.ArgoManifestsOCI(t, strings.NewReplacer("HOST", reg.Host, "team/deploy", "team/flux-typed").Replace(app))
	if err == nil || !strings.Contains(err.Error(), "not in the list of allowed media types") {
		t.Errorf("an artifact with Flux's content media type: %v", err)
	}
}
