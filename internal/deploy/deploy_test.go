package deploy

import (
	"context"
	"strings"
	"testing"

	"sluice.dev/sluice/internal/render"
	"sluice.dev/sluice/internal/testenv"
)

// What `sluice apply`, `diff` and a live session apply of a chart is what
// helm install would: podinfo without the three test Pods `helm
// template` prints; ingress-nginx with its seven hooks, each said, since
// one apply has no phases.
func TestAChartIsAppliedWithoutItsTests(t *testing.T) {
	r, err := Render(context.Background(), testenv.Chart(t, "podinfo"), render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Objects {
		if o.GetKind() == "Pod" {
			t.Errorf("the test %s is applied", o.GetName())
		}
	}
	if len(r.Hooks) != 3 || len(r.Warnings) != 0 {
		t.Errorf("podinfo: %d hooks recorded, warnings %v", len(r.Hooks), r.Warnings)
	}
	r, err = Render(context.Background(), testenv.Chart(t, "ingress-nginx"), render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 7 || !strings.Contains(r.Warnings[0], "kubectl applies it with the rest of the folder") {
		t.Errorf("ingress-nginx: %v", r.Warnings)
	}
}
