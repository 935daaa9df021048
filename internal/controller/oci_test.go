package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/api/v1alpha1"
)

// The API server holds an OCI destination to its form (the CRD's rule: a
// tag and no branch; a git destination a branch and no tag), and the
// controller, which does not write OCI destinations yet, says so in the
// sync's status instead of failing in the dark.
func TestOCIDestinationsAtTheAPIServerAndTheController(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct{ destination, want string }{
		{"{repo: oci://REG/team/deploy, branch: env/dev, path: apps/web}", "an oci:// destination takes a tag and no branch"},
		{"{repo: DST, tag: dev, path: apps/web}", "an oci:// destination takes a tag and no branch"},
		{"{repo: DST, path: apps/web}", "a git destination a branch and no tag"},
	} {
		ms := &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: e.ns}}
		y := e.expand(strings.Replace(webSync, "{repo: DST, branch: env/dev, path: apps/web}", c.destination, 1), "")
		if err := yaml.UnmarshalStrict([]byte(y), ms); err != nil {
			t.Fatal(err)
		}
		ms.Namespace = e.ns
		err := e.c.Create(ctx, ms)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("creating a sync with destination %s: %v, want %q", c.destination, err, c.want)
		}
	}
	e.start()
	e.apply(strings.Replace(webSync, "{repo: DST, branch: env/dev, path: apps/web}", "{repo: oci://REG/team/deploy, tag: dev, path: apps/web}", 1))
	ms := e.ready("web", metav1.ConditionFalse, 30*time.Second)
	c := meta.FindStatusCondition(ms.Status.Conditions, v1alpha1.ConditionReady)
	if c.Reason != v1alpha1.ReasonInvalid || !strings.Contains(c.Message, "OCI destinations are written by `sluice hydrate`") {
		t.Errorf("the controller says %s: %s", c.Reason, c.Message)
	}
}
