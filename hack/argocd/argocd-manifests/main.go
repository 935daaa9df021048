// Command argocd-manifests prints the manifests Argo CD's repo-server
// generates for an Application's source in a local checkout (its own
// reposerver/repository.GenerateManifests, as the application controller
// asks for them): the reference the tests hold Sluice's rendering of a
// folder as an Application to. It runs the kustomize and helm binaries on
// PATH, as the repo-server does.
//
//	argocd-manifests -app app.yaml -root CHECKOUT [-source N] [-tracking annotation|label|annotation+label] [-installation-id ID] [-control-plane argocd] [-hooks]
//
// With -hooks it prints instead, for each manifest, what Argo CD's sync
// makes of it (gitops-engine's own hook classification): whether it is a
// hook, the sync phases it runs in (none: never applied), its delete
// policies and its wave, as JSON lines.
//
// A multi-source Application's `ref` sources are taken from the same
// checkout when their repoURL is the source's.
//
// A source whose repoURL is oci:// is read from its registry instead of
// -root, by Argo CD's own OCI client (util/oci) with the repo-server's
// default allowed layer media types (-oci-plain-http for a registry on
// loopback): resolved, pulled and extracted as the repo-server does.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/reposerver/apiclient"
	"github.com/argoproj/argo-cd/v3/reposerver/repository"
	"github.com/argoproj/argo-cd/v3/util/git"
	utilio "github.com/argoproj/argo-cd/v3/util/io"
	"github.com/argoproj/argo-cd/v3/util/oci"
	"github.com/argoproj/gitops-engine/pkg/sync/hook"
	"github.com/argoproj/gitops-engine/pkg/sync/syncwaves"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func main() {
	appFile := flag.String("app", "", "the Application, as YAML")
	root := flag.String("root", "", "the checkout of its source's repository")
	index := flag.Int("source", 0, "which of spec.sources (a multi-source Application)")
	tracking := flag.String("tracking", "annotation", "resource tracking method")
	installation := flag.String("installation-id", "", "argocd-cm's installationID")
	controlPlane := flag.String("control-plane", "argocd", "Argo CD's own namespace")
	hooks := flag.Bool("hooks", false, "print each manifest's hook classification instead")
	plainHTTP := flag.Bool("oci-plain-http", false, "reach an oci:// source's registry over plain HTTP")
	flag.Parse()
	if err := run(*appFile, *root, *index, *tracking, *installation, *controlPlane, *hooks, *plainHTTP); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-manifests:", err)
		os.Exit(1)
	}
}

// repoServerLayerMediaTypes are the repo-server's default
// --oci-layer-media-types (cmd/argocd-repo-server).
var repoServerLayerMediaTypes = []string{"application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.cncf.helm.chart.content.v1.tar+gzip"}

func run(appFile, root string, index int, tracking, installation, controlPlane string, hooks, plainHTTP bool) error {
	data, err := os.ReadFile(appFile)
	if err != nil {
		return err
	}
	var app v1alpha1.Application
	if err := yaml.Unmarshal(data, &app); err != nil {
		return err
	}
	src := app.Spec.GetSource()
	refs := map[string]*v1alpha1.RefTarget{}
	paths := utilio.NewRandomizedTempPaths(os.TempDir())
	if app.Spec.HasMultipleSources() {
		src = app.Spec.Sources[index]
		for _, s := range app.Spec.Sources {
			if s.Ref != "" {
				refs["$"+s.Ref] = &v1alpha1.RefTarget{Repo: v1alpha1.Repository{Repo: s.RepoURL}, TargetRevision: s.TargetRevision}
				paths.Add(git.NormalizeGitURL(s.RepoURL), root)
			}
		}
	}
	repo := &v1alpha1.Repository{Repo: src.RepoURL}
	revision := "HEAD"
	if strings.HasPrefix(src.RepoURL, "oci://") {
		c, err := oci.NewClient(src.RepoURL, oci.Creds{InsecureHTTPOnly: plainHTTP}, "", "", repoServerLayerMediaTypes, oci.WithImagePaths(paths), oci.WithManifestMaxExtractedSize(1<<30))
		if err != nil {
			return err
		}
		digest, err := c.ResolveRevision(context.Background(), src.TargetRevision, true)
		if err != nil {
			return fmt.Errorf("resolving %s: %w", src.TargetRevision, err)
		}
		dir, closer, err := c.Extract(context.Background(), digest)
		if err != nil {
			return fmt.Errorf("extracting %s@%s: %w", src.RepoURL, digest, err)
		}
		defer closer.Close()
		root, revision = dir, digest
		repo.Type = "oci"
		fmt.Fprintf(os.Stderr, "extracted %s@%s\n", src.RepoURL, digest)
	}
	q := &apiclient.ManifestRequest{
		Repo:               repo,
		Revision:           revision,
		AppLabelKey:        "app.kubernetes.io/instance",
		AppName:            app.InstanceName(controlPlane),
		Namespace:          app.Spec.Destination.Namespace,
		ApplicationSource:  &src,
		KustomizeOptions:   &v1alpha1.KustomizeOptions{},
		TrackingMethod:     tracking,
		InstallationID:     installation,
		HasMultipleSources: app.Spec.HasMultipleSources(),
		RefSources:         refs,
		ProjectSourceRepos: []string{"*"},
		ProjectName:        "default",
	}
	res, err := repository.GenerateManifests(context.Background(), filepath.Join(root, src.Path), root, revision, q, true, &git.NoopCredsStore{}, resource.MustParse("0"), paths)
	if err != nil {
		return err
	}
	for _, m := range res.Manifests {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			return err
		}
		if hooks {
			if err := classify(obj); err != nil {
				return err
			}
			continue
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", out)
	}
	return nil
}

// classification is what Argo CD's sync makes of one manifest.
type classification struct {
	ID             string   `json:"id"`
	Hook           bool     `json:"hook"`
	Phases         []string `json:"phases"`
	DeletePolicies []string `json:"deletePolicies,omitempty"`
	Wave           int      `json:"wave"`
}

// classify prints a manifest's classification by gitops-engine, as its
// sync context reads it: a hook runs once per phase it has (none: never),
// anything else is applied in the Sync phase.
func classify(obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	c := classification{ID: u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName(), Hook: hook.IsHook(u), Wave: syncwaves.Wave(u)}
	if c.Hook {
		for _, t := range hook.Types(u) {
			c.Phases = append(c.Phases, string(t))
		}
		for _, p := range hook.DeletePolicies(u) {
			c.DeletePolicies = append(c.DeletePolicies, string(p))
		}
	} else {
		c.Phases = []string{"Sync"}
	}
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}
