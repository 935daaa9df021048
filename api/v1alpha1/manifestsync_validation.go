package v1alpha1

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"text/template"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted ManifestSync and returns every problem found,
// each with the path of the field it concerns.
func (s *ManifestSync) Validate() field.ErrorList {
	errs := validateName(s.Name, field.NewPath("metadata", "name"))
	spec := field.NewPath("spec")
	errs = append(errs, s.Spec.Source.validate(spec.Child("source"))...)
	if s.Spec.Render != nil {
		errs = append(errs, s.Spec.Render.validate(spec.Child("render"))...)
	}
	for i, img := range s.Spec.Images {
		errs = append(errs, img.validate(spec.Child("images").Index(i))...)
	}
	errs = append(errs, s.Spec.Destination.validate(spec.Child("destination"))...)
	if d := s.Spec.Deployer; d != nil {
		errs = append(errs, d.validate(spec.Child("deployer"))...)
	}
	errs = append(errs, validateSecrets(s.Spec.Destination, s.Spec.DeployerTool(), spec.Child("destination"))...)
	return errs
}

func (s Source) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Repo == "" {
		errs = append(errs, field.Required(p.Child("repo"), "a git URL or a local path"))
	}
	if s.Ref != "" && !IsCommitSHA(s.Ref) {
		if err := ValidateRefName(strings.TrimPrefix(s.Ref, "refs/")); err != nil {
			errs = append(errs, field.Invalid(p.Child("ref"), s.Ref, err.Error()))
		}
	}
	return append(errs, validateRelPath(s.Path, p.Child("path"))...)
}

func (r Render) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if k := r.Kustomize; k != nil {
		switch k.LoadRestrictor {
		case LoadRestrictorRootOnly, LoadRestrictorNone:
		default:
			errs = append(errs, field.NotSupported(p.Child("kustomize", "loadRestrictor"), k.LoadRestrictor,
				[]string{LoadRestrictorRootOnly, LoadRestrictorNone}))
		}
	}
	if h := r.Helm; h != nil {
		errs = append(errs, h.validate(p.Child("helm"))...)
	}
	return errs
}

func (h HelmRender) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Values != nil && len(h.Values.Raw) > 0 {
		var m map[string]any
		if err := json.Unmarshal(h.Values.Raw, &m); err != nil {
			errs = append(errs, field.Invalid(p.Child("values"), string(h.Values.Raw), "must be a mapping"))
		}
	}
	for i, f := range h.ValuesFiles {
		errs = append(errs, validateRelPath(f, p.Child("valuesFiles").Index(i))...)
	}
	if h.KubeVersion != "" {
		if _, err := semver.NewVersion(h.KubeVersion); err != nil {
			errs = append(errs, field.Invalid(p.Child("kubeVersion"), h.KubeVersion, "must be a version such as 1.31.0"))
		}
	}
	for i, v := range h.APIVersions {
		if v == "" || strings.ContainsAny(v, " \t,") || strings.Count(v, "/") > 2 {
			errs = append(errs, field.Invalid(p.Child("apiVersions").Index(i), v, "must be an API version (\"apps/v1\", \"v1\") or one with a kind (\"monitoring.coreos.com/v1/ServiceMonitor\")"))
		}
	}
	if c := h.Chart; c != nil {
		cp := p.Child("chart")
		switch {
		case c.Repo == "":
			errs = append(errs, field.Required(cp.Child("repo"), "oci://host/path or an https:// chart repository"))
		case !strings.HasPrefix(c.Repo, "oci://") && !strings.HasPrefix(c.Repo, "https://") && !strings.HasPrefix(c.Repo, "http://"):
			errs = append(errs, field.Invalid(cp.Child("repo"), c.Repo, "must start with oci:// or https://"))
		}
		if c.Name == "" {
			errs = append(errs, field.Required(cp.Child("name"), "the chart's name"))
		}
		if c.Version == "" {
			errs = append(errs, field.Required(cp.Child("version"), "a chart version or semver range; pinning a version keeps hydration reproducible"))
		} else if _, err := semver.NewConstraint(c.Version); err != nil {
			errs = append(errs, field.Invalid(cp.Child("version"), c.Version, err.Error()))
		}
	}
	return errs
}

func (r ImageRule) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), `a repository or a glob such as "registry.example.com/team/*"`))
	} else if strings.ContainsAny(r.Name, "@") || hasTag(r.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), r.Name, "must name a repository, without tag or digest"))
	}
	switch r.Strategy {
	case StrategyMutableTag:
		if r.Tag != "" {
			if err := ValidateTag(r.Tag); err != nil {
				errs = append(errs, field.Invalid(p.Child("tag"), r.Tag, err.Error()))
			}
		}
	case StrategySourceCommit:
		if r.TagLength != 0 && (r.TagLength < 4 || r.TagLength > 40) {
			errs = append(errs, field.Invalid(p.Child("tagLength"), r.TagLength, "must be between 4 and 40, or 0 for the full SHA"))
		}
	case StrategySemver:
		if r.Constraint == "" {
			errs = append(errs, field.Required(p.Child("constraint"), `a semver range such as ">=1.2.0 <2.0.0"`))
		} else {
			errs = append(errs, validateSemverConstraint(r.Constraint, p.Child("constraint"))...)
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("strategy"), r.Strategy,
			[]ImageStrategy{StrategyMutableTag, StrategySourceCommit, StrategySemver}))
	}
	if r.Verify != nil {
		errs = append(errs, r.Verify.validate(p.Child("verify"))...)
	}
	if r.Tag != "" && r.Strategy != StrategyMutableTag {
		errs = append(errs, field.Forbidden(p.Child("tag"), "only the mutableTag strategy takes a tag"))
	}
	if r.TagLength != 0 && r.Strategy != StrategySourceCommit {
		errs = append(errs, field.Forbidden(p.Child("tagLength"), "only the sourceCommit strategy takes a tagLength"))
	}
	if r.Constraint != "" && r.Strategy != StrategySemver {
		errs = append(errs, field.Forbidden(p.Child("constraint"), "only the semver strategy takes a constraint"))
	}
	return errs
}

// hasTag reports whether a repository string carries a :tag after its last
// slash (a colon before it is a registry port).
func hasTag(repo string) bool {
	i := strings.LastIndex(repo, "/")
	return strings.Contains(repo[i+1:], ":")
}

func (d Destination) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d.Repo == "" {
		errs = append(errs, field.Required(p.Child("repo"), "a git URL or a local path (defaults to spec.source.repo), or oci://REGISTRY/REPOSITORY"))
	}
	errs = append(errs, d.Signing.validate(p.Child("signing"), d.IsOCI())...)
	if d.IsOCI() {
		errs = append(errs, d.validateOCI(p)...)
	} else {
		if d.Tag != "" {
			errs = append(errs, field.Forbidden(p.Child("tag"), "only with an oci:// repo; a git destination names a branch"))
		}
		if d.Branch == "" {
			errs = append(errs, field.Required(p.Child("branch"), "the branch to write to, such as env/dev"))
		} else if err := ValidateRefName(d.Branch); err != nil {
			errs = append(errs, field.Invalid(p.Child("branch"), d.Branch, err.Error()))
		}
	}
	switch d.Path {
	case "":
		errs = append(errs, field.Required(p.Child("path"), "the folder this sync owns, such as apps/guestbook"))
	case ".":
		errs = append(errs, field.Invalid(p.Child("path"), d.Path, "must be a folder, not the branch root: the sync owns this folder and nothing else"))
	default:
		errs = append(errs, validateRelPath(d.Path, p.Child("path"))...)
	}
	switch d.Layout {
	case LayoutPerObject, LayoutSingle:
	default:
		errs = append(errs, field.NotSupported(p.Child("layout"), d.Layout, []string{LayoutPerObject, LayoutSingle}))
	}
	switch d.Mode {
	case ModePush, ModeBranch:
		if d.PullRequest != nil {
			errs = append(errs, field.Forbidden(p.Child("pullRequest"), "only with mode: pullRequest"))
		}
	case ModePullRequest:
		errs = append(errs, validatePullRequest(d, p.Child("pullRequest"))...)
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), d.Mode, []string{ModePush, ModeBranch, ModePullRequest}))
	}
	return errs
}

// validateOCI checks an OCI destination: a repository, a tag, and
// nothing of git's (a branch, review modes, commit signing).
func (d Destination) validateOCI(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	repo := strings.TrimPrefix(d.Repo, OCIScheme)
	host, path, ok := strings.Cut(repo, "/")
	switch {
	case !ok || host == "" || path == "" || strings.Contains(repo, "@") || strings.ContainsAny(path, ": ") || strings.ToLower(path) != path:
		errs = append(errs, field.Invalid(p.Child("repo"), d.Repo, "an OCI destination is oci://REGISTRY/REPOSITORY (lowercase, no tag or digest: the tag is spec.destination.tag)"))
	}
	if d.Branch != "" {
		errs = append(errs, field.Forbidden(p.Child("branch"), "an oci:// destination has no branch: name its tag in spec.destination.tag"))
	}
	if d.Tag == "" {
		errs = append(errs, field.Required(p.Child("tag"), "the tag the artifact is pushed under, such as dev"))
	} else if err := ValidateTag(d.Tag); err != nil {
		errs = append(errs, field.Invalid(p.Child("tag"), d.Tag, err.Error()))
	}
	if d.Mode == ModeBranch || d.Mode == ModePullRequest {
		errs = append(errs, field.Forbidden(p.Child("mode"), "an OCI destination has no review branch or pull request (a registry reviews nothing): use mode: push, and review the source's pull requests (sluice preview)"))
	}
	return errs
}

// validate checks how a destination is signed: a git destination's
// commits with a key of a Secret; an OCI destination's artifacts with
// cosign (a key, or keyless) or Notation (a certificate and its key).
func (s *Signing) validate(p *field.Path, oci bool) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if !oci {
		if s.Provider != "" {
			errs = append(errs, field.Forbidden(p.Child("provider"), "signs an OCI destination's artifacts; a git destination's commits are signed with the key spec.destination.signing.secretRef names"))
		}
		if s.Keyless != nil {
			errs = append(errs, field.Forbidden(p.Child("keyless"), "signs an OCI destination's artifacts; git commits are signed with a key"))
		}
		if s.SecretRef == nil {
			errs = append(errs, field.Required(p.Child("secretRef"), "the Secret of the SSH or OpenPGP key commits are signed with"))
		}
		return errs
	}
	switch s.Provider {
	case "", SigningCosign:
		if (s.SecretRef == nil) == (s.Keyless == nil) {
			errs = append(errs, field.Required(p, "cosign signs with the key of a Secret (secretRef: cosign.key, cosign.password) or keyless, one of the two"))
		}
	case SigningNotation:
		if s.SecretRef == nil {
			errs = append(errs, field.Required(p.Child("secretRef"), "the Secret of the Notation certificate and key (tls.crt, tls.key, ca.crt)"))
		}
		if s.Keyless != nil {
			errs = append(errs, field.Forbidden(p.Child("keyless"), "keyless signing is cosign's; Notation signs with a certificate's key"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("provider"), s.Provider, []string{SigningCosign, SigningNotation}))
	}
	if k := s.Keyless; k != nil {
		for name, u := range map[string]string{"fulcioURL": k.FulcioURL, "timestampURL": k.TimestampURL, "rekorURL": k.RekorURL} {
			if err := validateServiceURL(u); err != nil {
				errs = append(errs, field.Invalid(p.Child("keyless", name), u, err.Error()))
			}
		}
	}
	return errs
}

// validateServiceURL checks the URL of a signing service: https, or
// http on loopback (a test's); "" is the default.
func validateServiceURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.User != nil:
		return fmt.Errorf("expected an https URL")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("expected an https URL (http only on loopback)")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsCommitSHA reports whether ref is a full SHA-1 commit name.
func IsCommitSHA(ref string) bool {
	if len(ref) != 40 {
		return false
	}
	for _, c := range ref {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// ForgeOf is the forge a repository URL is on, when its host says
// (github.com, gitlab.com, a host whose name says gitlab or gitea); ""
// otherwise.
func ForgeOf(repo string) string {
	host := repo
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = host[i+1:]
	}
	host, _, _ = strings.Cut(host, "/")
	host, _, _ = strings.Cut(host, ":")
	host = strings.ToLower(host)
	switch {
	case host == "github.com" || strings.HasSuffix(host, ".github.com"):
		return ForgeGitHub
	case strings.Contains(host, "gitlab"):
		return ForgeGitLab
	case strings.Contains(host, "gitea") || strings.Contains(host, "forgejo") || host == "codeberg.org":
		return ForgeGitea
	}
	return ""
}

func validatePullRequest(d Destination, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	pr := d.PullRequest
	forge := ""
	if pr != nil {
		forge = pr.Forge
	}
	switch forge {
	case ForgeGitHub, ForgeGitLab, ForgeGitea:
	case "":
		if ForgeOf(d.Repo) == "" {
			errs = append(errs, field.Required(p.Child("forge"), fmt.Sprintf("the forge %s is on (github, gitlab or gitea): its host does not say", d.Repo)))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("forge"), forge, []string{ForgeGitHub, ForgeGitLab, ForgeGitea}))
	}
	if pr == nil {
		return errs
	}
	for name, tmpl := range map[string]string{"title": pr.Title, "body": pr.Body} {
		if tmpl == "" {
			continue
		}
		if _, err := template.New(name).Option("missingkey=error").Parse(tmpl); err != nil {
			errs = append(errs, field.Invalid(p.Child(name), tmpl, err.Error()))
		}
	}
	return errs
}

// The providers of image signatures.
const (
	VerifyCosign   = "cosign"
	VerifyNotation = "notation"
)

// Key says what a rule's verification is read and remembered under:
// rules with equal keys trust the same signatures.
func (v *ImageVerify) Key() string {
	if v.Provider == VerifyNotation && v.SecretRef != nil {
		return "notation " + v.SecretRef.Name
	}
	if v.Keyless != nil {
		k := v.Keyless
		root := ""
		if k.TrustedRootRef != nil {
			root = k.TrustedRootRef.Name
		}
		return fmt.Sprintf("keyless %q %q %q %q %q", k.Issuer, k.IssuerRegExp, k.Subject, k.SubjectRegExp, root)
	}
	if v.SecretRef != nil {
		return "key " + v.SecretRef.Name
	}
	return ""
}

func (v *ImageVerify) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Provider {
	case VerifyCosign:
	case VerifyNotation:
		switch {
		case v.Keyless != nil:
			errs = append(errs, field.Forbidden(p.Child("keyless"), "notation checks signatures against a trust policy: give secretRef"))
		case v.SecretRef == nil || v.SecretRef.Name == "":
			errs = append(errs, field.Required(p.Child("secretRef"), "the Secret holding trustpolicy.json and the certificates of its trust stores"))
		}
		return errs
	default:
		errs = append(errs, field.NotSupported(p.Child("provider"), v.Provider, []string{VerifyCosign, VerifyNotation}))
	}
	switch {
	case v.SecretRef == nil && v.Keyless == nil:
		errs = append(errs, field.Required(p, "secretRef (a Secret with cosign.pub) or keyless (the identity that signs)"))
	case v.SecretRef != nil && v.Keyless != nil:
		errs = append(errs, field.Forbidden(p.Child("keyless"), "one of secretRef and keyless: a signature is made with a key or keylessly"))
	case v.SecretRef != nil && v.SecretRef.Name == "":
		errs = append(errs, field.Required(p.Child("secretRef", "name"), "the Secret holding cosign.pub"))
	case v.Keyless != nil:
		k, kp := v.Keyless, p.Child("keyless")
		if (k.Issuer == "") == (k.IssuerRegExp == "") {
			errs = append(errs, field.Required(kp.Child("issuer"), "the OIDC issuer, exactly (issuer) or as a regular expression (issuerRegExp), one of them"))
		}
		if (k.Subject == "") == (k.SubjectRegExp == "") {
			errs = append(errs, field.Required(kp.Child("subject"), "the signer's identity, exactly (subject) or as a regular expression (subjectRegExp), one of them"))
		}
		for _, re := range []struct{ name, expr string }{{"issuerRegExp", k.IssuerRegExp}, {"subjectRegExp", k.SubjectRegExp}} {
			if _, err := regexp.Compile(re.expr); err != nil {
				errs = append(errs, field.Invalid(kp.Child(re.name), re.expr, err.Error()))
			}
		}
		if k.TrustedRootRef != nil && k.TrustedRootRef.Name == "" {
			errs = append(errs, field.Required(kp.Child("trustedRootRef", "name"), "the Secret holding trusted_root.json"))
		}
	}
	return errs
}
