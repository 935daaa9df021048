package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateGitPathRefusesWhatGitRefuses(t *testing.T) {
	tests := []struct {
		path string
		want string // "" for valid
	}{
		{"apps/web", ""},
		{"apps/.github/workflows", ""},
		{"apps/.gitkeep", ""},
		{".GIT/hooks", ".git folder"},
		{"apps/.Git", ".git folder"},
		{"apps/.git./x", ".git folder"},
		{"apps/.git /x", ".git folder"},
		{"GIT~1/hooks", ".git folder"},
		{".g\u200cit/hooks", ".git folder"},
		{"a//b", "empty path element"},
		{"a/../b", "git refuses"},
		{`a\b`, "Windows"},
		{"a/b:c", "Windows"},
		{"a/\x01", "Windows"},
	}
	for _, tt := range tests {
		err := ValidateGitPath(tt.path)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.path, err, tt.want)
		}
	}
	ms := &ManifestSync{Spec: ManifestSyncSpec{Source: Source{Repo: "."}, Destination: Destination{Branch: "main", Path: ".GIT/hooks"}}}
	ms.Name = "x"
	ms.Default()
	if errs := ms.Validate(); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "spec.destination.path") {
		t.Errorf("destination .GIT/hooks: %v", errs)
	}
}

func TestPullRequestModeNeedsAForgeAndValidTemplates(t *testing.T) {
	for _, c := range []struct {
		name string
		d    Destination
		want string // "" when valid
	}{
		{"github by host", Destination{Repo: "https://github.com/acme/deploy.git", Branch: "main", Path: "apps/web", Mode: ModePullRequest}, ""},
		{"gitea by host", Destination{Repo: "ssh://git@gitea.acme.dev/acme/deploy.git", Branch: "main", Path: "apps/web", Mode: ModePullRequest}, ""},
		{"unknown host, no forge", Destination{Repo: "https://git.acme.dev/deploy.git", Branch: "main", Path: "apps/web", Mode: ModePullRequest}, "spec.destination.pullRequest.forge: Required"},
		{"unknown host, forge given", Destination{Repo: "https://git.acme.dev/deploy.git", Branch: "main", Path: "apps/web", Mode: ModePullRequest, PullRequest: &PullRequest{Forge: ForgeGitea}}, ""},
		{"bad title", Destination{Repo: "https://github.com/a/b", Branch: "main", Path: "apps/web", Mode: ModePullRequest, PullRequest: &PullRequest{Title: "{{.Branch"}}, "spec.destination.pullRequest.title: Invalid"},
		{"block without the mode", Destination{Repo: "https://github.com/a/b", Branch: "main", Path: "apps/web", Mode: ModePush, PullRequest: &PullRequest{}}, "spec.destination.pullRequest: Forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			d.Layout = LayoutPerObject
			errs := d.validate(field.NewPath("spec", "destination"))
			got := errs.ToAggregate()
			switch {
			case c.want == "" && got != nil:
				t.Errorf("refused: %v", got)
			case c.want != "" && (got == nil || !strings.Contains(got.Error(), c.want)):
				t.Errorf("got %v, want %s", got, c.want)
			}
		})
	}
}

func TestImageVerifyNeedsAKeyOrAnIdentity(t *testing.T) {
	key := &SecretRef{Name: "cosign"}
	for _, c := range []struct {
		name string
		v    ImageVerify
		want string // "" when valid
	}{
		{"a key", ImageVerify{Provider: "cosign", SecretRef: key}, ""},
		{"keyless", ImageVerify{Provider: "cosign", Keyless: &Keyless{Issuer: "https://token.actions.githubusercontent.com", Subject: "https://github.com/a/b/.github/workflows/r.yml@refs/heads/main"}}, ""},
		{"keyless by expressions", ImageVerify{Provider: "cosign", Keyless: &Keyless{IssuerRegExp: "https://.*", SubjectRegExp: ".*@example\\.com", TrustedRootRef: &SecretRef{Name: "root"}}}, ""},
		{"neither", ImageVerify{Provider: "cosign"}, "spec.images[0].verify: Required"},
		{"both", ImageVerify{Provider: "cosign", SecretRef: key, Keyless: &Keyless{Issuer: "i", Subject: "s"}}, "spec.images[0].verify.keyless: Forbidden"},
		{"no issuer", ImageVerify{Provider: "cosign", Keyless: &Keyless{Subject: "s"}}, "spec.images[0].verify.keyless.issuer: Required"},
		{"two subjects", ImageVerify{Provider: "cosign", Keyless: &Keyless{Issuer: "i", Subject: "s", SubjectRegExp: "s"}}, "spec.images[0].verify.keyless.subject: Required"},
		{"a bad expression", ImageVerify{Provider: "cosign", Keyless: &Keyless{Issuer: "i", SubjectRegExp: "("}}, "spec.images[0].verify.keyless.subjectRegExp: Invalid"},
		{"notation", ImageVerify{Provider: "notation", SecretRef: &SecretRef{Name: "trust"}}, ""},
		{"notation without its trust policy", ImageVerify{Provider: "notation"}, "spec.images[0].verify.secretRef: Required"},
		{"notation, keyless", ImageVerify{Provider: "notation", Keyless: &Keyless{Issuer: "i", Subject: "s"}}, "spec.images[0].verify.keyless: Forbidden"},
		{"another provider", ImageVerify{Provider: "gpg", SecretRef: key}, "spec.images[0].verify.provider: Unsupported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ImageRule{Name: "registry.example.com/web", Strategy: StrategyMutableTag, Verify: &c.v}
			errs := r.validate(field.NewPath("spec", "images").Index(0))
			got := errs.ToAggregate()
			if (got == nil) != (c.want == "") || got != nil && !strings.Contains(got.Error(), c.want) {
				t.Errorf("got %v, want %q", got, c.want)
			}
		})
	}
	a := ImageVerify{Keyless: &Keyless{Issuer: "i", Subject: "s"}}
	b := ImageVerify{Keyless: &Keyless{Issuer: "i", SubjectRegExp: "s"}}
	if a.Key() == b.Key() || a.Key() == (&ImageVerify{SecretRef: key}).Key() {
		t.Error("different trust under one key")
	}
}

// An OCI destination is a repository and a tag, and nothing of git's; a
// git destination is a branch, and no tag.
func TestOCIDestinationsTakeATagAndNothingOfGits(t *testing.T) {
	oci := func(d Destination) Destination {
		if d.Repo == "" {
			d.Repo = "oci://ghcr.io/acme/deploy"
		}
		d.Path, d.Layout = "apps/web", LayoutPerObject
		if d.Mode == "" {
			d.Mode = ModePush
		}
		return d
	}
	git := func(d Destination) Destination {
		d.Repo, d.Branch, d.Path, d.Layout, d.Mode = "https://git.example.com/deploy.git", "main", "apps/web", LayoutPerObject, ModePush
		return d
	}
	key := &SecretRef{Name: "k"}
	for _, c := range []struct {
		name string
		d    Destination
		want string // "" when valid
	}{
		{"repo and tag", oci(Destination{Tag: "dev"}), ""},
		{"a registry port", oci(Destination{Repo: "oci://localhost:5000/team/deploy", Tag: "dev"}), ""},
		{"no tag", oci(Destination{}), "spec.destination.tag: Required"},
		{"a branch", oci(Destination{Tag: "dev", Branch: "env/dev"}), "spec.destination.branch: Forbidden"},
		{"a bad tag", oci(Destination{Tag: "dev/x"}), "spec.destination.tag: Invalid"},
		{"a tag in the repo", oci(Destination{Repo: "oci://ghcr.io/acme/deploy:dev", Tag: "dev"}), "spec.destination.repo: Invalid"},
		{"uppercase", oci(Destination{Repo: "oci://ghcr.io/Acme/deploy", Tag: "dev"}), "spec.destination.repo: Invalid"},
		{"no repository", oci(Destination{Repo: "oci://ghcr.io", Tag: "dev"}), "spec.destination.repo: Invalid"},
		{"pull requests", oci(Destination{Tag: "dev", Mode: ModePullRequest, PullRequest: &PullRequest{Forge: ForgeGitHub}}), "no review branch or pull request"},
		{"review branches", oci(Destination{Tag: "dev", Mode: ModeBranch}), "no review branch or pull request"},
		{"git with a tag", git(Destination{Tag: "dev"}), "spec.destination.tag: Forbidden"},
		// Signing: a git destination's commits with a key; an OCI
		// destination's artifacts with cosign (a key or keyless) or
		// Notation (a certificate's key).
		{"a cosign key", oci(Destination{Tag: "dev", Signing: &Signing{SecretRef: key}}), ""},
		{"cosign keyless", oci(Destination{Tag: "dev", Signing: &Signing{Provider: SigningCosign, Keyless: &SigningKeyless{}}}), ""},
		{"keyless on loopback", oci(Destination{Tag: "dev", Signing: &Signing{Keyless: &SigningKeyless{FulcioURL: "http://127.0.0.1:5555", TimestampURL: "https://tsa.example.com/api/v1/timestamp"}}}), ""},
		{"keyless over http", oci(Destination{Tag: "dev", Signing: &Signing{Keyless: &SigningKeyless{FulcioURL: "http://fulcio.example.com"}}}), "spec.destination.signing.keyless.fulcioURL: Invalid"},
		{"a log over http", oci(Destination{Tag: "dev", Signing: &Signing{Keyless: &SigningKeyless{RekorURL: "http://rekor.example.com"}}}), "spec.destination.signing.keyless.rekorURL: Invalid"},
		{"a key and keyless", oci(Destination{Tag: "dev", Signing: &Signing{SecretRef: key, Keyless: &SigningKeyless{}}}), "spec.destination.signing: Required"},
		{"cosign with neither", oci(Destination{Tag: "dev", Signing: &Signing{}}), "spec.destination.signing: Required"},
		{"notation", oci(Destination{Tag: "dev", Signing: &Signing{Provider: SigningNotation, SecretRef: key}}), ""},
		{"notation keyless", oci(Destination{Tag: "dev", Signing: &Signing{Provider: SigningNotation, Keyless: &SigningKeyless{}}}), "spec.destination.signing.secretRef: Required"},
		{"another provider", oci(Destination{Tag: "dev", Signing: &Signing{Provider: "gpg", SecretRef: key}}), "spec.destination.signing.provider: Unsupported"},
		{"git commit signing", git(Destination{Signing: &Signing{SecretRef: key}}), ""},
		{"git with a provider", git(Destination{Signing: &Signing{Provider: SigningCosign, SecretRef: key}}), "spec.destination.signing.provider: Forbidden"},
		{"git keyless", git(Destination{Signing: &Signing{Keyless: &SigningKeyless{}}}), "spec.destination.signing.keyless: Forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := c.d.validate(field.NewPath("spec", "destination"))
			got := errs.ToAggregate()
			switch {
			case c.want == "" && got != nil:
				t.Errorf("refused: %v", got)
			case c.want != "" && (got == nil || !strings.Contains(got.Error(), c.want)):
				t.Errorf("got %v, want %s", got, c.want)
			}
		})
	}
}
