package ociartifact

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"sluice.dev/sluice/internal/testenv"
)

func tagOf(t *testing.T, reg *testenv.Registry, repoTag string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(reg.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func digestAt(t *testing.T, tag name.Tag) string {
	t.Helper()
	d, err := remote.Head(tag)
	if err != nil {
		return ""
	}
	return d.Digest.String()
}

// A push moves the tag only to a whole artifact, and only when it
// changes: the same content again writes nothing; a failure before or
// while tagging (a refusal of BeforeTag, the registry refusing the tag)
// leaves the tag where it was.
func TestAPushMovesTheTagOnlyToAWholeArtifact(t *testing.T) {
	reg := testenv.NewRegistry(t)
	tag := tagOf(t, reg, "team/deploy:dev")
	ctx := context.Background()

	v1img, _ := Pack(folder, meta)
	var signed []string
	sign := func(_ context.Context, ref name.Digest) error { signed = append(signed, ref.DigestStr()); return nil }
	res, err := Push(ctx, tag, v1img, PushOptions{BeforeTag: sign, Tags: []string{"dev-abababa"}})
	if err != nil || !res.Pushed {
		t.Fatalf("first push: %+v %v", res, err)
	}
	if got := digestAt(t, tag); got != res.Digest.String() || len(signed) != 1 || signed[0] != got {
		t.Errorf("the tag is at %s, signed %v, pushed %s", got, signed, res.Digest)
	}
	if got := digestAt(t, tagOf(t, reg, "team/deploy:dev-abababa")); got != res.Digest.String() {
		t.Errorf("the immutable tag is at %s", got)
	}
	files, m, _, found, err := Read(ctx, tag, DefaultLimits())
	if err != nil || !found || !Ours(m) || len(files) != len(folder) {
		t.Errorf("read back: %d files, found %v, ours %v, %v", len(files), found, Ours(m), err)
	}

	uploads := reg.Uploads.Load()
	again, _ := Pack(folder, meta)
	res2, err := Push(ctx, tag, again, PushOptions{BeforeTag: sign})
	if err != nil || res2.Pushed || res2.Previous != res.Digest || reg.Uploads.Load() != uploads || len(signed) != 1 {
		t.Errorf("the same content again: %+v %v, %d uploads, %d signatures", res2, err, reg.Uploads.Load()-uploads, len(signed))
	}

	changed := map[string][]byte{"apps/web/configmap-web.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {color: green}\n")}
	v2img, _ := Pack(changed, meta)
	if _, err := Push(ctx, tag, v2img, PushOptions{BeforeTag: func(context.Context, name.Digest) error { return errors.New("the signing key cannot sign") }}); err == nil || !strings.Contains(err.Error(), "the signing key cannot sign") {
		t.Errorf("a push whose signing fails: %v", err)
	}
	if got := digestAt(t, tag); got != res.Digest.String() {
		t.Errorf("a push whose signing failed moved the tag to %s", got)
	}
	reg.FailWith(func(r *http.Request) int {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/manifests/dev") {
			return http.StatusTooManyRequests
		}
		return 0
	})
	if _, err := Push(ctx, tag, v2img, PushOptions{Remote: []remote.Option{remote.WithRetryBackoff(remote.Backoff{Steps: 1})}}); err == nil {
		t.Errorf("a push whose tagging the registry refused succeeded")
	}
	if got := digestAt(t, tag); got != res.Digest.String() {
		t.Errorf("a refused tagging moved the tag to %s", got)
	}
	reg.FailWith(nil)
	if res3, err := Push(ctx, tag, v2img, PushOptions{}); err != nil || !res3.Pushed || digestAt(t, tag) != res3.Digest.String() {
		t.Errorf("once the registry takes it: %+v %v", res3, err)
	}
}

// A tag that points at an artifact Sluice did not push (someone's image,
// a `flux push artifact`) is not moved unless the destination says so;
// the refusal names the digest found.
func TestAPushRefusesToMoveATagSluiceDidNotPush(t *testing.T) {
	reg := testenv.NewRegistry(t)
	foreign, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	theirs := reg.PushImage(t, "team/deploy:prod", foreign)
	tag := tagOf(t, reg, "team/deploy:prod")
	img, _ := Pack(folder, meta)
	_, err = Push(context.Background(), tag, img, PushOptions{})
	if err == nil || !strings.Contains(err.Error(), theirs) || !strings.Contains(err.Error(), "which Sluice did not push") {
		t.Errorf("moving someone else's tag: %v", err)
	}
	if got := digestAt(t, tag); got != theirs {
		t.Errorf("the refused push moved the tag to %s", got)
	}
	if res, err := Push(context.Background(), tag, img, PushOptions{Overwrite: true}); err != nil || !res.Pushed || digestAt(t, tag) != res.Digest.String() {
		t.Errorf("with Overwrite: %+v %v", res, err)
	}
}
