package dashboard

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/testenv"
)

// The images page: each Image's last build, and the syncs that pin its
// repository, at that build or another; a new build shows live.
func TestImagesPageShowsBuildsAndWhoPinsThem(t *testing.T) {
	c := kube(t)
	ctx := context.Background()
	ns := testenv.Namespace("imgs")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	d1, d2 := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	img := &v1alpha1.Image{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.ImageSpec{Image: "registry.example.com/team/web", Base: "scratch",
			Source: []v1alpha1.ImageSource{{Repo: "https://git.example.com/team/web.git", Mappings: []v1alpha1.Mapping{{Src: "dist", Dest: "/srv"}}}}},
	}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	img.Status.LastBuild = &v1alpha1.ImageBuild{Digest: d1, Tags: []string{"abc123"}, Inputs: "sha256:" + strings.Repeat("9", 64), Source: "https://git.example.com/team/web.git@abc123", Built: true}
	img.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSucceeded, Message: "built", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	for name, digest := range map[string]string{"current": d1, "behind": d2} {
		st := ready(strings.Repeat("a", 40))
		st.Images = []v1alpha1.PinnedImage{{Name: "registry.example.com/team/web", From: "registry.example.com/team/web", Tag: "abc123", Digest: digest}}
		syncWith(t, c, ns, name, st, nil)
	}
	base := serve(t, cp.Config, Options{Namespace: ns})
	b := browser(t)
	row := `tr[data-image="` + ns + `/web"]`
	do(t, b, chromedp.Navigate(base+"/images"), chromedp.WaitVisible(row))
	waitText(t, b, "#live-status", "live")
	text := strings.Join(strings.Fields(run(t, b, chromedp.Text(row))), " ")
	for _, want := range []string{"Ready", "registry.example.com/team/web", "111111111111 built", "abc123",
		ns + "/behind abc123 → 222222222222 ◆ another build", ns + "/current abc123 → 111111111111 ✓ last build"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Image's row lacks %q: %q", want, text)
		}
	}
	screenshot(t, b, "images")

	// A new build: the page follows without a reload.
	img.Status.LastBuild.Digest = d2
	if err := c.Status().Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	waitText(t, b, `div[data-pin="`+ns+`/behind"]`, "last build")
}
