package dashboard

import (
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
)

func TestCommitURLs(t *testing.T) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct{ repo, want string }{
		{"https://github.com/acme/web.git", "https://github.com/acme/web/commit/" + c},
		{"https://gitlab.example.com/acme/web", "https://gitlab.example.com/acme/web/-/commit/" + c},
		{"https://gitea.example.com/acme/web.git/", "https://gitea.example.com/acme/web/commit/" + c},
		{"http://127.0.0.1:3000/acme/web.git", "http://127.0.0.1:3000/acme/web/commit/" + c},
		{"http://git.example.com/acme/web.git", ""},        // plain http off loopback: no link
		{"https://user:token@github.com/acme/web.git", ""}, // credentials never reach a page
		{"ssh://git@github.com/acme/web.git", ""},          // no web URL known
		{"/srv/git/web.git", ""},
	} {
		if got := commitURL(tc.repo, c); got != tc.want {
			t.Errorf("commitURL(%q) = %q, want %q", tc.repo, got, tc.want)
		}
	}
}

func TestStates(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	for _, tc := range []struct {
		want    string
		suspend bool
		conds   []metav1.Condition
	}{
		{StateUnknown, false, nil},
		{StateReady, false, []metav1.Condition{cond("Ready", "True", "Succeeded")}},
		{StateFailed, false, []metav1.Condition{cond("Ready", "False", "Failed")}},
		{StateFailed, false, []metav1.Condition{cond("Ready", "False", "VerificationFailed")}},
		{StateLocked, false, []metav1.Condition{cond("Ready", "False", "Locked")}},
		{StateStalled, false, []metav1.Condition{cond("Ready", "False", "Invalid"), cond("Stalled", "True", "Invalid")}},
		{StateProgressing, false, []metav1.Condition{cond("Ready", "True", "Succeeded"), cond("Reconciling", "True", "Progressing")}},
		{StateSuspended, true, []metav1.Condition{cond("Ready", "True", "Succeeded")}},
	} {
		ms := &v1alpha1.ManifestSync{Spec: v1alpha1.ManifestSyncSpec{Suspend: tc.suspend}}
		ms.Status.Conditions = tc.conds
		if got, _ := stateOf(ms); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.conds, got, tc.want)
		}
	}
}

func TestFilterQueries(t *testing.T) {
	f := filterOf(url.Values{"namespace": {"team-a"}, "state": {"Bogus"}, "label": {"team in (a"}, "page": {"-3"}})
	if f.State != "" || f.Page != 1 || f.Err == "" {
		t.Errorf("a bad state, page and selector: %+v", f)
	}
	f = filterOf(url.Values{"namespace": {"team-a"}, "state": {"Failed"}, "q": {"web"}})
	if got := f.query(3); got != "?namespace=team-a&page=3&q=web&state=Failed" {
		t.Errorf("the next page's link keeps the filter: %s", got)
	}
}

// A sync's page says who signed its source and what signs its commits.
func TestASyncsRowSaysHowItsCommitsAreSigned(t *testing.T) {
	ms := &v1alpha1.ManifestSync{}
	ms.Spec.Source.Repo = "https://git.example.com/app.git"
	ms.Spec.Destination = v1alpha1.Destination{Branch: "main", Path: "apps/web", Signing: &v1alpha1.Signing{SecretRef: &v1alpha1.SecretRef{Name: "sluice-signing"}}}
	ms.Status.Source = &v1alpha1.ProvenanceSource{Commit: "0123456789abcdef0123456789abcdef01234567", SignedBy: "dev@example.com (SSH SHA256:abc)"}
	r := rowOf(ms)
	if r.Source.Signed != "verified: signed by dev@example.com (SSH SHA256:abc)" || r.Destination.Signed != "commits signed with the key of Secret sluice-signing" {
		t.Errorf("source %q, destination %q", r.Source.Signed, r.Destination.Signed)
	}
	if r := rowOf(&v1alpha1.ManifestSync{}); r.Source.Signed != "" || r.Destination.Signed != "" {
		t.Errorf("an unsigned sync: %+v", r)
	}
}

// An OCI destination's row names its tag and the digest its artifact
// has, and how artifacts are signed (a key, keyless, Notation).
func TestAnOCISyncsRowNamesItsArtifact(t *testing.T) {
	ms := &v1alpha1.ManifestSync{}
	ms.Spec.Source.Repo = "https://git.example.com/app.git"
	ms.Spec.Destination = v1alpha1.Destination{Repo: "oci://registry.example.com/team/deploy", Tag: "dev", Path: "apps/web", Signing: &v1alpha1.Signing{Keyless: &v1alpha1.SigningKeyless{}}}
	digest := "sha256:" + strings.Repeat("a", 64)
	ms.Status.Destination = &v1alpha1.DestinationStatus{Repo: ms.Spec.Destination.Repo, Tag: "dev", Path: "apps/web", Digest: digest}
	r := rowOf(ms)
	if r.Destination.Ref != "dev" || r.Destination.Commit != digest || r.Destination.Signed != "artifacts signed by cosign, keyless, through https://fulcio.sigstore.dev" {
		t.Errorf("the destination: %+v", r.Destination)
	}
	for _, c := range []struct {
		signing *v1alpha1.Signing
		want    string
	}{
		{&v1alpha1.Signing{SecretRef: &v1alpha1.SecretRef{Name: "cosign"}}, "artifacts signed by cosign with the key of Secret cosign"},
		{&v1alpha1.Signing{Provider: v1alpha1.SigningNotation, SecretRef: &v1alpha1.SecretRef{Name: "cert"}}, "artifacts signed by Notation with the certificate of Secret cert"},
	} {
		ms.Spec.Destination.Signing = c.signing
		if got := rowOf(ms).Destination.Signed; got != c.want {
			t.Errorf("signed %q, want %q", got, c.want)
		}
	}
}
