package hydrate

import (
	"reflect"
	"strings"
	"testing"

	"sluice.dev/sluice/api/v1alpha1"
)

func TestSetExpiresChangesOnlyTheExpiry(t *testing.T) {
	p := &v1alpha1.Provenance{
		APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.KindProvenance, Sync: "web",
		Source:      v1alpha1.ProvenanceSource{Repo: "https://git.example.com/app.git", Commit: strings.Repeat("a", 40), Path: "deploy/web"},
		Renderer:    v1alpha1.Renderer{Name: "kustomize", Version: "v5"},
		Images:      []v1alpha1.PinnedImage{{Name: "web", From: "web", Tag: "dev-alice", Digest: "sha256:" + strings.Repeat("b", 64)}},
		Inputs:      []v1alpha1.Input{{Path: "deploy/web/kustomization.yaml", Hash: strings.Repeat("c", 40)}},
		Fingerprint: "sha256:f", Manifests: "sha256:m",
		Takeover: &v1alpha1.Takeover{Owner: "alice@laptop", Commit: strings.Repeat("d", 40), Tag: "dev-alice", Expires: "2026-12-03T18:00:00Z"},
	}
	data, err := marshalProvenance(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := setExpires(data, "2026-12-03T22:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseProvenance(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := parseProvenance(data)
	want.Takeover.Expires = "2026-12-03T22:00:00Z"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after setExpires:\n%+v\nwant\n%+v", got, want)
	}
	if wantBytes, _ := marshalProvenance(want); string(out) != string(wantBytes) {
		t.Errorf("the record's layout changed:\n%s\nwant\n%s", out, wantBytes)
	}
	if _, err := setExpires([]byte("kind: Provenance\n"), "x"); err == nil {
		t.Error("a record without a takeover was extended")
	}
}
