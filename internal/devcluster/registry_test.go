package devcluster

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The dev registry takes a push and serves it back by tag and digest, and
// listens only on loopback.
func TestTheDevRegistryServesWhatIsPushed(t *testing.T) {
	r, err := ServeRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Host+"/example/guestbook:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	got, err := remote.Head(ref)
	if err != nil || got.Digest != want {
		t.Fatalf("the tag resolves to %v (%v), want %s", got, err, want)
	}
	for _, addr := range []string{"0.0.0.0:0", "192.168.1.10:5000", ":5000"} {
		if _, err := ServeRegistry(addr); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("ServeRegistry(%q): %v, want refused as not loopback", addr, err)
		}
	}
}
