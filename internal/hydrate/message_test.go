package hydrate

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/config"
)

// A commit's message lists its syncs in one order whatever order they
// were planned in: the controller plans a branch's syncs as their
// reconciles come.
func TestACommitMessageIsTheSameInAnyOrder(t *testing.T) {
	mk := func(ns, name string) *plan {
		return &plan{
			ms:      config.ManifestSync{ManifestSync: &v1alpha1.ManifestSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}},
			dstPath: "apps/" + name,
			prov:    &v1alpha1.Provenance{Source: v1alpha1.ProvenanceSource{Repo: "https://git.example.com/" + name + ".git", Commit: strings.Repeat("a", 40)}},
		}
	}
	a, b, c := mk("team", "shop-dev"), mk("team", "guestbook-dev"), mk("alpha", "web")
	first := commitMessage([]*plan{a, b, c})
	if second := commitMessage([]*plan{c, b, a}); second != first {
		t.Errorf("the same syncs in another order give another message:\n%s\n---\n%s", first, second)
	}
	if !strings.HasPrefix(first, "hydrate 3 syncs: web, guestbook-dev, shop-dev\n") {
		t.Errorf("the subject is not by namespace and name:\n%s", first)
	}
}
