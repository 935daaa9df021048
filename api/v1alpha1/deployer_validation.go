package v1alpha1

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func (d *Deployer) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch d.Tool {
	case "", DeployerFlux, DeployerArgoCD, DeployerKubectl:
	default:
		errs = append(errs, field.NotSupported(p.Child("tool"), d.Tool, []string{DeployerFlux, DeployerArgoCD, DeployerKubectl}))
	}
	switch d.UnsupportedHooks {
	case "", HooksWarn, HooksRefuse:
	default:
		errs = append(errs, field.NotSupported(p.Child("unsupportedHooks"), d.UnsupportedHooks, []string{HooksWarn, HooksRefuse}))
	}
	f := d.Flux
	if f == nil {
		return errs
	}
	fp := p.Child("flux")
	if d.Tool != "" && d.Tool != DeployerFlux {
		return append(errs, field.Forbidden(fp, "only with tool: flux"))
	}
	sp := fp.Child("sourceRef")
	switch f.SourceRef.Kind {
	case "", "GitRepository", "OCIRepository", "Bucket":
	default:
		errs = append(errs, field.NotSupported(sp.Child("kind"), f.SourceRef.Kind, []string{"GitRepository", "OCIRepository", "Bucket"}))
	}
	if f.SourceRef.Name == "" {
		errs = append(errs, field.Required(sp.Child("name"), "the Flux source that reads the destination branch, such as the GitRepository of the Kustomization applying the folder"))
	}
	for _, n := range []struct {
		path  *field.Path
		value string
	}{{sp.Child("name"), f.SourceRef.Name}, {sp.Child("namespace"), f.SourceRef.Namespace}, {fp.Child("namespace"), f.Namespace}, {fp.Child("serviceAccountName"), f.ServiceAccountName}} {
		if n.value == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(n.value) {
			errs = append(errs, field.Invalid(n.path, n.value, msg))
		}
	}
	if f.Interval != nil && f.Interval.Duration <= 0 {
		errs = append(errs, field.Invalid(fp.Child("interval"), f.Interval.Duration.String(), "must be positive"))
	}
	if f.Timeout != nil && f.Timeout.Duration <= 0 {
		errs = append(errs, field.Invalid(fp.Child("timeout"), f.Timeout.Duration.String(), "must be positive"))
	}
	if r := f.DecryptionSecretRef; r != nil && r.Name == "" {
		errs = append(errs, field.Required(fp.Child("decryptionSecretRef", "name"), "the Secret of SOPS keys"))
	}
	return errs
}

// The shapes of SOPS recipients, checked before any is used (a key that
// passes may still be refused by SOPS when the folder is encrypted; that
// error names the setting too).
var (
	ageRecipient = regexp.MustCompile(`^age1[02-9ac-hj-np-z]{58}$`)
	pgpPrint     = regexp.MustCompile(`^([0-9A-Fa-f]{16}|[0-9A-Fa-f]{40}|[0-9A-Fa-f]{64})$`)
	awsKMSARN    = regexp.MustCompile(`^arn:aws[\w-]*:kms:[\w-]+:\d{12}:(key|alias)/[\w/+=,.@:-]+(\+arn:aws[\w-]*:iam::\d{12}:role/[\w/+=,.@-]+)?$`)
	gcpKMSID     = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$`)
)

func validateSecrets(d Destination, tool string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch d.Secrets {
	case "", SecretsEncrypt, SecretsOmit, SecretsPlaintext:
	default:
		errs = append(errs, field.NotSupported(p.Child("secrets"), d.Secrets, []string{SecretsEncrypt, SecretsOmit, SecretsPlaintext}))
	}
	s := d.SOPS
	if s.Empty() {
		return errs
	}
	sp := p.Child("sops")
	switch {
	case d.Secrets == SecretsOmit || d.Secrets == SecretsPlaintext:
		errs = append(errs, field.Forbidden(sp, "recipients encrypt Secrets, and secrets is "+d.Secrets+": remove one of them"))
	case tool == DeployerArgoCD:
		errs = append(errs, field.Forbidden(sp, "Argo CD applies a folder's files as they are and cannot decrypt SOPS by itself: an encrypted Secret would reach the API server as ciphertext and be refused. Set secrets: omit (External Secrets, Sealed Secrets or a vault plugin provides them) or plaintext"))
	case tool == DeployerKubectl:
		errs = append(errs, field.Forbidden(sp, "kubectl apply cannot decrypt SOPS: an encrypted Secret would reach the API server as ciphertext and be refused. Set secrets: omit or plaintext"))
	}
	check := func(name string, list []string, ok func(string) bool, want string) {
		for i, v := range list {
			if !ok(strings.TrimSpace(v)) {
				errs = append(errs, field.Invalid(sp.Child(name).Index(i), v, "must be "+want))
			}
		}
	}
	check("age", s.Age, ageRecipient.MatchString, "an age recipient (age1 and 58 bech32 characters)")
	check("pgp", s.PGP, pgpPrint.MatchString, "an OpenPGP key fingerprint (40 or 64 hexadecimal digits) or long key ID (16)")
	check("awsKMS", s.AWSKMS, awsKMSARN.MatchString, "an AWS KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), optionally +ROLE-ARN")
	check("gcpKMS", s.GCPKMS, gcpKMSID.MatchString, "a GCP KMS key resource ID (projects/P/locations/L/keyRings/R/cryptoKeys/K)")
	check("azureKeyVault", s.AzureKeyVault, func(v string) bool {
		return strings.HasPrefix(v, "https://") && strings.Contains(v, "/keys/")
	}, "an Azure Key Vault key URL (https://VAULT.vault.azure.net/keys/NAME/VERSION)")
	check("hcVaultTransit", s.HCVaultTransit, func(v string) bool {
		return (strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://")) && strings.Contains(v, "/keys/")
	}, "a Vault transit key URI (https://vault:8200/v1/transit/keys/NAME)")
	return errs
}

// SecretsPolicy is what becomes of the folder's Secrets, its default filled
// in.
func (d Destination) SecretsPolicy() string {
	if d.Secrets == "" {
		return SecretsEncrypt
	}
	return d.Secrets
}
