package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
)

// An Image resource is built from its git source onto its base and pushed;
// an unchanged source is only looked up again; a new commit, asked for,
// builds anew. An external builder is refused unless the controller allows
// builders.
func TestImageIsBuiltAndRebuiltOnChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	ctx := context.Background()
	e.reg.Push(t, "base/static:1")
	e.app.Write(map[string]string{"web/index.html": "<h1>one</h1>\n"}).Commit("page")
	e.app.Push("main")
	obj := e.apply(`apiVersion: sluice.dev/v1alpha1
kind: Image
metadata: {name: web}
spec:
  image: REG/team/web
  base: REG/base/static:1
  source:
  - repo: APP
    ref: main
    mappings: [{src: web/index.html, dest: /srv/index.html}]
  tags: [sourceCommit, latest]
  interval: 1h
`)
	get := func() *v1alpha1.Image {
		img := &v1alpha1.Image{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(obj), img); err != nil {
			t.Fatal(err)
		}
		return img
	}
	settled := func(want metav1.ConditionStatus) *v1alpha1.Image {
		var img *v1alpha1.Image
		e.eventually(60*time.Second, func() string {
			img = get()
			c := meta.FindStatusCondition(img.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != want || img.Status.ObservedGeneration != img.Generation || img.Status.LastHandledReconcileAt != img.Annotations[v1alpha1.ReconcileRequestAnnotation] {
				return "Image not settled: " + condString(c)
			}
			return ""
		})
		return img
	}
	img := settled(metav1.ConditionTrue)
	first := img.Status.LastBuild
	if first == nil || !first.Built || !strings.HasPrefix(first.Digest, "sha256:") || !containsString(first.Tags, e.app.Head()) {
		t.Fatalf("first build: %+v", first)
	}
	e.eventually(10*time.Second, func() string { return e.hasEvent("web", "Built") })
	// A new commit, asked for: a new image.
	e.app.Write(map[string]string{"web/index.html": "<h1>two</h1>\n"}).Commit("page two")
	e.app.Push("main")
	e.requestReconcile(img, "new-commit")
	img = settled(metav1.ConditionTrue)
	if img.Status.LastBuild.Digest == first.Digest || !containsString(img.Status.LastBuild.Tags, e.app.Head()) {
		t.Fatalf("after a new commit: %+v (first %s)", img.Status.LastBuild, first.Digest)
	}
	// An external builder would run a command in the controller.
	e.apply(`apiVersion: sluice.dev/v1alpha1
kind: Image
metadata: {name: built-outside}
spec:
  image: REG/team/other
  base: REG/base/static:1
  source: [{repo: APP, ref: main, mappings: [{src: web/index.html, dest: /i}]}]
  builder: {command: [sh, -c, "echo pwned"]}
`)
	e.eventually(30*time.Second, func() string {
		other := &v1alpha1.Image{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "built-outside"}, other); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(other.Status.Conditions, v1alpha1.ConditionStalled); c == nil || !strings.Contains(c.Message, "--allow-builders") {
			return "an external builder not refused: " + condString(meta.FindStatusCondition(other.Status.Conditions, v1alpha1.ConditionReady))
		}
		return ""
	})
}
