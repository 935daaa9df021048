// Package credentials reads the Secrets Sluice's resources name into what
// the engines take: git credentials as Flux's GitRepository keys them, and
// registry keychains from dockerconfigjson Secrets. Values never leave
// them: not into logs, statuses or errors.
package credentials

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/artifactsig"
	"sluice.dev/sluice/internal/forge"
	"sluice.dev/sluice/internal/imagesig"
	"sluice.dev/sluice/internal/signing"
	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/synckey"
)

// Keys of a git credentials Secret, as Flux's GitRepository reads them.
const (
	keyUsername    = "username"
	keyPassword    = "password"
	keyBearerToken = "bearerToken"
	keyIdentity    = "identity"
	keyKnownHosts  = "known_hosts"
	keyPassphrase  = "password" // of an encrypted identity
	// A GitHub App's, as Flux's GitRepository reads them (provider
	// github).
	keyGitHubAppID             = "githubAppID"
	keyGitHubAppInstallationID = "githubAppInstallationID"
	keyGitHubAppPrivateKey     = "githubAppPrivateKey"
	keyGitHubAppBaseURL        = "githubAppBaseURL"
)

// Secrets reads the Secrets resources name, straight from the API server
// (the controller watches no Secret: it may only get those named), each
// remembered for a short while so that the syncs of one batch sharing a
// Secret read it once.
type Secrets struct {
	reader client.Reader
	ttl    time.Duration
	// Public is Sigstore's public trusted root, for keyless rules that
	// name none (nil: the root embedded in Sluice).
	Public *imagesig.PublicRoot
	// IdentityToken reads the controller's own identity token (its
	// service account's, audience sigstore) for keyless signing; nil:
	// the controller has none, and a sync asking for keyless signing
	// fails saying so.
	IdentityToken func(context.Context) (string, error)
	// Transport carries keyless signing's requests to Fulcio and the
	// timestamp authority (nil: http.DefaultTransport).
	Transport http.RoundTripper

	mu   sync.Mutex
	read map[client.ObjectKey]readSecret
	// parsed are the keys made of Secrets, by what was made and the
	// Secret's version: parsing a key (stretching an OpenPGP key's
	// passphrase) once per version, not at every reconcile of every sync.
	parsed map[string]any
}

type readSecret struct {
	sec *corev1.Secret
	at  time.Time
}

// NewSecrets reads through r: the controller's API reader, or a user's
// client (who may read only their own).
func NewSecrets(r client.Reader) *Secrets {
	return &Secrets{reader: r, ttl: 30 * time.Second, read: map[client.ObjectKey]readSecret{}}
}

// Get reads one Secret.
func (s *Secrets) Get(ctx context.Context, namespace string, ref *v1alpha1.SecretRef) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: namespace, Name: ref.Name}
	s.mu.Lock()
	r, ok := s.read[key]
	s.mu.Unlock()
	if !ok || time.Since(r.at) > s.ttl {
		r = readSecret{sec: &corev1.Secret{}, at: time.Now()}
		if err := s.reader.Get(ctx, key, r.sec); err != nil {
			// Not remembered: a Secret created next is read at once.
			return nil, fmt.Errorf("Secret %s/%s: %w", namespace, ref.Name, err)
		}
		s.mu.Lock()
		if len(s.read) > 10_000 {
			clear(s.read)
		}
		s.read[key] = r
		s.mu.Unlock()
	}
	return r.sec, nil
}

// Git reads a git credentials Secret. nil ref: none (anonymous, and clones
// kept apart from those of any Secret).
func (s *Secrets) Git(ctx context.Context, namespace string, ref *v1alpha1.SecretRef) (*source.Credentials, error) {
	if ref == nil {
		return &source.Credentials{Scope: "anonymous"}, nil
	}
	sec, err := s.Get(ctx, namespace, ref)
	if err != nil {
		return nil, err
	}
	d := sec.Data
	a := source.Auth{Username: string(d[keyUsername]), Password: string(d[keyPassword])}
	if tok := d[keyBearerToken]; len(tok) > 0 {
		a.Password = string(tok)
		if a.Username == "" {
			a.Username = "x-access-token"
		}
	}
	if len(d[keyGitHubAppID]) > 0 {
		app, err := parsedOnce(s, "github-app", sec, func() (*forge.GitHubApp, error) {
			return forge.NewGitHubApp(string(d[keyGitHubAppID]), string(d[keyGitHubAppInstallationID]), d[keyGitHubAppPrivateKey], string(d[keyGitHubAppBaseURL]))
		})
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s: %w", namespace, ref.Name, err)
		}
		a = source.Auth{Username: "x-access-token", Token: app.Token, TokenID: "github-app/" + app.ID}
	}
	if id := d[keyIdentity]; len(id) > 0 {
		a.SSHKey, a.SSHKeyPassphrase = id, string(d[keyPassphrase])
		a.KnownHostsData = d[keyKnownHosts]
		if a.KnownHostsData == nil {
			return nil, fmt.Errorf("Secret %s/%s: an ssh identity needs known_hosts beside it: the controller checks every host key", namespace, ref.Name)
		}
		a.Password = ""
	}
	// Clones are kept apart per Secret, not per version of it: a rotated
	// token goes on fetching into the same clone.
	return &source.Credentials{Auth: a, Scope: namespace + "/" + ref.Name}, nil
}

// Signer reads a signing Secret (spec.destination.signing): an SSH
// private key under "identity", or an armored OpenPGP private key under
// "git.asc", with its passphrase under "passphrase". nil: commits stay
// unsigned.
func (s *Secrets) Signer(ctx context.Context, namespace string, sg *v1alpha1.Signing) (signing.Signer, error) {
	if sg == nil {
		return nil, nil
	}
	sec, err := s.Get(ctx, namespace, sg.SecretRef)
	if err != nil {
		return nil, fmt.Errorf("spec.destination.signing: %w", err)
	}
	key := sec.Data[keyIdentity]
	name := keyIdentity
	if len(key) == 0 {
		key, name = sec.Data["git.asc"], "git.asc"
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("spec.destination.signing: Secret %s/%s holds no %s (an SSH private key) or git.asc (an armored OpenPGP private key)", namespace, sg.SecretRef.Name, keyIdentity)
	}
	// "passphrase", as Flux's image-automation-controller names it; an
	// SSH identity's may be under "password", as in git credentials.
	passphrase := sec.Data["passphrase"]
	if len(passphrase) == 0 {
		passphrase = sec.Data[keyPassphrase]
	}
	signer, err := parsedOnce(s, "signer", sec, func() (signing.Signer, error) { return signing.Parse(key, passphrase) })
	if err != nil {
		return nil, fmt.Errorf("spec.destination.signing: Secret %s/%s key %s: %w", namespace, sg.SecretRef.Name, name, err)
	}
	return signer, nil
}

// Keys of an OCI destination's signing Secret: cosign's, as `cosign
// generate-key-pair k8s://NAMESPACE/NAME` writes them; Notation's, a
// kubernetes.io/tls Secret's (a certificate and its key, and the CA's
// certificate), as cert-manager writes them.
const (
	keyCosignKey      = "cosign.key"
	keyCosignPassword = "cosign.password"
)

// ArtifactSigner reads what signs an OCI destination's artifacts
// (spec.destination.signing). nil: they are pushed unsigned.
func (s *Secrets) ArtifactSigner(ctx context.Context, namespace string, sg *v1alpha1.Signing) (artifactsig.Signer, error) {
	if sg == nil {
		return nil, nil
	}
	if k := sg.Keyless; k != nil {
		if s.IdentityToken == nil {
			return nil, errors.New("spec.destination.signing.keyless: the controller has no identity token to sign with: install it with keyless signing on (the chart's signing.keyless.enabled, a projected service account token of audience sigstore at --identity-token-file)")
		}
		return artifactsig.KeylessSigner(artifactsig.Keyless{
			FulcioURL: cmp.Or(k.FulcioURL, v1alpha1.DefaultFulcioURL), TimestampURL: cmp.Or(k.TimestampURL, v1alpha1.DefaultTimestampURL),
			RekorURL: cmp.Or(k.RekorURL, v1alpha1.DefaultRekorURL),
			Token:    s.IdentityToken, Transport: s.Transport,
		}), nil
	}
	sec, err := s.Get(ctx, namespace, sg.SecretRef)
	if err != nil {
		return nil, fmt.Errorf("spec.destination.signing: %w", err)
	}
	where := fmt.Sprintf("Secret %s/%s", namespace, sg.SecretRef.Name)
	if sg.Provider == v1alpha1.SigningNotation {
		chain := append(append([]byte{}, sec.Data[corev1.TLSCertKey]...), '\n')
		chain = append(chain, sec.Data["ca.crt"]...)
		k, err := parsedOnce(s, "notation-key", sec, func() (*artifactsig.NotationKey, error) {
			if len(sec.Data[corev1.TLSCertKey]) == 0 || len(sec.Data[corev1.TLSPrivateKeyKey]) == 0 {
				return nil, fmt.Errorf("no %s and %s: a Notation signing Secret is a kubernetes.io/tls Secret", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
			}
			return artifactsig.ParseNotationKey(sec.Data[corev1.TLSPrivateKeyKey], chain)
		})
		if err != nil {
			return nil, fmt.Errorf("spec.destination.signing: %s: %w", where, err)
		}
		return artifactsig.NotationSigner(k, "Notation with the certificate of "+where), nil
	}
	k, err := parsedOnce(s, "cosign-key", sec, func() (*artifactsig.Key, error) {
		if len(sec.Data[keyCosignKey]) == 0 {
			return nil, fmt.Errorf("no %s (cosign generate-key-pair k8s://%s/%s writes one)", keyCosignKey, namespace, sg.SecretRef.Name)
		}
		return artifactsig.ParseKey(sec.Data[keyCosignKey], sec.Data[keyCosignPassword])
	})
	if err != nil {
		return nil, fmt.Errorf("spec.destination.signing: %s key %s: %w", where, keyCosignKey, err)
	}
	return artifactsig.CosignKey(k, "cosign with the key of "+where), nil
}

// parsedOnce returns what parse makes of a Secret, made once per version
// of the Secret (failures are not remembered).
func parsedOnce[T any](s *Secrets, what string, sec *corev1.Secret, parse func() (T, error)) (T, error) {
	key := what + "/" + string(sec.UID) + "/" + sec.ResourceVersion
	s.mu.Lock()
	v, ok := s.parsed[key]
	s.mu.Unlock()
	if ok && sec.ResourceVersion != "" {
		return v.(T), nil
	}
	out, err := parse()
	if err != nil {
		return out, err
	}
	s.mu.Lock()
	if s.parsed == nil || len(s.parsed) > 10_000 {
		s.parsed = map[string]any{}
	}
	s.parsed[key] = out
	s.mu.Unlock()
	return out, nil
}

// Verifier reads the trusted keys of spec.source.verify: every value of
// its Secret (armored OpenPGP public keys, SSH allowed signers). nil:
// the source is not checked.
func (s *Secrets) Verifier(ctx context.Context, namespace string, v *v1alpha1.Verify) (*signing.Verifier, error) {
	if v == nil {
		return nil, nil
	}
	sec, err := s.Get(ctx, namespace, &v.SecretRef)
	if err != nil {
		return nil, fmt.Errorf("spec.source.verify: %w", err)
	}
	ver, err := parsedOnce(s, "verifier", sec, func() (*signing.Verifier, error) { return signing.ParseVerifier(sec.Data) })
	if err != nil {
		return nil, fmt.Errorf("spec.source.verify: Secret %s/%s: %w", namespace, v.SecretRef.Name, err)
	}
	return ver, nil
}

// ImagePolicies reads what the image rules that ask for verification
// trust, by ImageVerify.Key: the key cosign.pub of a Secret, or a
// keyless identity under the trusted_root.json of a Secret (Sigstore's
// public instance when none is named).
func (s *Secrets) ImagePolicies(ctx context.Context, namespace string, rules []v1alpha1.ImageRule) (map[string]*imagesig.Policy, error) {
	var out map[string]*imagesig.Policy
	for i, r := range rules {
		v := r.Verify
		if v == nil {
			continue
		}
		if _, ok := out[v.Key()]; ok {
			continue
		}
		if v.Provider == v1alpha1.VerifyNotation {
			sec, err := s.Get(ctx, namespace, v.SecretRef)
			if err != nil {
				return nil, fmt.Errorf("spec.images[%d].verify: %w", i, err)
			}
			n, err := parsedOnce(s, "notation", sec, func() (*imagesig.Notation, error) {
				return imagesig.ParseNotation(sec.Data[imagesig.TrustPolicyKey], sec.Data)
			})
			if err != nil {
				return nil, fmt.Errorf("spec.images[%d].verify: Secret %s/%s: %w", i, namespace, v.SecretRef.Name, err)
			}
			if out == nil {
				out = map[string]*imagesig.Policy{}
			}
			out[v.Key()] = &imagesig.Policy{Notation: n, Name: "the trust policy of Secret " + v.SecretRef.Name}
			continue
		}
		var keys imagesig.Keys
		var root *imagesig.TrustedRoot
		switch {
		case v.Keyless != nil && v.Keyless.TrustedRootRef != nil:
			ref := v.Keyless.TrustedRootRef
			sec, err := s.Get(ctx, namespace, ref)
			if err != nil {
				return nil, fmt.Errorf("spec.images[%d].verify.keyless.trustedRootRef: %w", i, err)
			}
			if root, err = parsedOnce(s, "trusted_root", sec, func() (*imagesig.TrustedRoot, error) {
				return imagesig.ParseTrustedRoot(sec.Data["trusted_root.json"])
			}); err != nil {
				return nil, fmt.Errorf("spec.images[%d].verify.keyless.trustedRootRef: Secret %s/%s key trusted_root.json: %w", i, namespace, ref.Name, err)
			}
		case v.Keyless != nil && s.Public != nil:
			root = s.Public.Root(ctx)
		case v.Keyless == nil && v.SecretRef != nil:
			sec, err := s.Get(ctx, namespace, v.SecretRef)
			if err != nil {
				return nil, fmt.Errorf("spec.images[%d].verify: %w", i, err)
			}
			if keys, err = parsedOnce(s, "cosign", sec, func() (imagesig.Keys, error) { return imagesig.ParseKeys(sec.Data["cosign.pub"]) }); err != nil {
				return nil, fmt.Errorf("spec.images[%d].verify: Secret %s/%s key cosign.pub: %w", i, namespace, v.SecretRef.Name, err)
			}
		}
		pol, err := imagesig.PolicyFor(v, keys, root)
		if err != nil {
			return nil, fmt.Errorf("spec.images[%d].verify: %w", i, err)
		}
		if out == nil {
			out = map[string]*imagesig.Policy{}
		}
		out[v.Key()] = pol
	}
	return out, nil
}

// Registry reads a kubernetes.io/dockerconfigjson Secret into a keychain,
// and names it for the clients that share it.
func (s *Secrets) Registry(ctx context.Context, namespace string, ref *v1alpha1.SecretRef) (authn.Keychain, string, error) {
	if ref == nil {
		return authn.NewMultiKeychain(), "anonymous", nil
	}
	sec, err := s.Get(ctx, namespace, ref)
	if err != nil {
		return nil, "", err
	}
	kc, err := readDockerConfig(namespace, ref.Name, sec.Data)
	if err != nil {
		return nil, "", err
	}
	return kc, fmt.Sprintf("%s/%s@%s", namespace, ref.Name, sec.ResourceVersion), nil
}

// readDockerConfig reads a kubernetes.io/dockerconfigjson Secret's auths.
func readDockerConfig(namespace, name string, data map[string][]byte) (dockerConfig, error) {
	raw, ok := data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, fmt.Errorf("Secret %s/%s: no %s: a registry Secret is of type %s", namespace, name, corev1.DockerConfigJsonKey, corev1.SecretTypeDockerConfigJson)
	}
	var cfg struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %s: %w", namespace, name, corev1.DockerConfigJsonKey, err)
	}
	return dockerConfig(cfg.Auths), nil
}

// dockerConfig is a keychain of a docker config's auths, by registry
// host ("https://index.docker.io/v1/" is Docker Hub's).
type dockerConfig map[string]authn.AuthConfig

func (d dockerConfig) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if v, ok := d.entry(r.RegistryStr()); ok {
		return authn.FromConfig(v), nil
	}
	return authn.Anonymous, nil
}

// entry is the auths entry for a registry host.
func (d dockerConfig) entry(host string) (authn.AuthConfig, bool) {
	for k, v := range d {
		k = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://"), "/")
		k, _, _ = strings.Cut(k, "/")
		if strings.EqualFold(k, host) {
			return v, true
		}
	}
	return authn.AuthConfig{}, false
}

// SyncKey reads the sync key a Secret holds under "key" (as `sluice
// sync-key new --secret` writes it).
func (s *Secrets) SyncKey(ctx context.Context, namespace, name string) (synckey.Key, error) {
	sec, err := s.Get(ctx, namespace, &v1alpha1.SecretRef{Name: name})
	if err != nil {
		return synckey.Key{}, err
	}
	k, err := synckey.Parse(string(sec.Data[synckey.SecretKey]))
	if err != nil {
		return synckey.Key{}, fmt.Errorf("Secret %s/%s, key %q: %w", namespace, name, synckey.SecretKey, err)
	}
	return k, nil
}
