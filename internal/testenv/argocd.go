package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ApplicationSetController returns the path of Argo CD's ApplicationSet
// controller that `make tools` builds (hack/argocd/build.sh).
func ApplicationSetController(t TB) string {
	t.Helper()
	return argoTool(t, "applicationset-controller")
}

func argoTool(t TB, name string) string {
	t.Helper()
	root, err := SourceRoot()
	if err != nil {
		t.Fatalf("%v", err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "argocd", "build.sh"), "--check", name).CombinedOutput()
	if err != nil {
		t.Fatalf("%s", strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out))
}

// ArgoManifests returns what Argo CD's repo-server generates for the
// Application app (YAML) from the checkout root (its own
// GenerateManifests, built by `make tools` as argocd-manifests, running
// the reference kustomize and helm binaries): what Argo CD would apply,
// as YAML documents. args are argocd-manifests' flags (-tracking,
// -source). root is left as it is.
func ArgoManifests(t TB, app, root string, args ...string) string {
	t.Helper()
	bin := argoTool(t, "argocd-manifests")
	// Argo CD edits a kustomization where it renders it: a copy, as its
	// repo-server's own checkout.
	checkout := filepath.Join(t.TempDir(), "checkout")
	if err := os.CopyFS(checkout, os.DirFS(root)); err != nil {
		t.Fatalf("copying %s: %v", root, err)
	}
	root = checkout
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(app), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	cmd := exec.Command(bin, append([]string{"-app", f, "-root", root}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(KustomizeBinary(t))+string(os.PathListSeparator)+filepath.Dir(HelmBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Argo CD's manifest generation: %v: %s", err, stderr.String())
	}
	return string(out)
}

// ArgoManifestsOCI is ArgoManifests for an Application whose source is
// an oci:// artifact: Argo CD's own OCI client resolves, pulls and
// extracts it from its registry (over plain HTTP: the test's registry)
// with the repo-server's default allowed layer media types. It returns
// the manifests, or the error Argo CD gives.
func ArgoManifestsOCI(t TB, app string, args ...string) (string, error) {
	t.Helper()
	bin := argoTool(t, "argocd-manifests")
	f := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(f, []byte(app), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	cmd := exec.Command(bin, append([]string{"-app", f, "-oci-plain-http"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "PATH="+filepath.Dir(KustomizeBinary(t))+string(os.PathListSeparator)+filepath.Dir(HelmBinary(t))+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// StartApplicationSetController runs Argo CD's real ApplicationSet
// controller out of cluster against a control plane, for the
// ApplicationSets of one namespace, with the settings it reads there
// (argocd-cm, argocd-secret, the default AppProject) created first. It
// stops when the test ends; logs returns its log.
func StartApplicationSetController(t TB, kubeconfig, namespace string, create func(yaml string)) (logs func() string) {
	t.Helper()
	bin := ApplicationSetController(t)
	create(`apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: ` + namespace + `, labels: {app.kubernetes.io/part-of: argocd}}
---
apiVersion: v1
kind: Secret
metadata: {name: argocd-secret, namespace: ` + namespace + `, labels: {app.kubernetes.io/part-of: argocd}}
stringData: {server.secretkey: sluice-test-key}
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: ` + namespace + `}
spec:
  sourceRepos: ['*']
  destinations: [{server: '*', namespace: '*'}]
`)
	logPath := filepath.Join(t.TempDir(), "applicationset-controller.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--namespace", namespace,
		"--metrics-addr", freeAddr(t), "--probe-addr", freeAddr(t), "--webhook-addr", freeAddr(t),
		"--argocd-repo-server", freeAddr(t), // no generator here asks it
		"--logformat", "text", "--loglevel", "debug")
	// Its manager reads the kubeconfig from the environment, its settings
	// informers from the flag.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the ApplicationSet controller: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		log.Close()
	})
	logs = func() string {
		data, _ := os.ReadFile(logPath)
		return string(data)
	}
	// It registers no health checks: it is ready when its workers start.
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(logs(), "Starting workers"); time.Sleep(100 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("the ApplicationSet controller exited:\n%s", logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ApplicationSet controller did not start its workers:\n%s", logs())
		}
	}
	return logs
}
