package credentials

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/source"
)

// Lender gives the resources a RepoConfig found the credentials the
// RepoConfig lends them (spec.credentials), each only where it is sent:
// a git Secret to the repositories of its URL's origin, a registry
// Secret's entry to its host. Nothing else of the namespace's Secrets
// reaches them.
type Lender struct {
	secrets   *Secrets
	namespace string
	lent      v1alpha1.FoundCredentials
}

// Lender lends what a RepoConfig of namespace lends.
func (s *Secrets) Lender(namespace string, lent v1alpha1.FoundCredentials) *Lender {
	return &Lender{secrets: s, namespace: namespace, lent: lent}
}

// Git is the credentials a found resource reads and writes repo with:
// the Secret lent for the repository's origin (scheme, host and port), or
// none.
func (l *Lender) Git(ctx context.Context, repo string) (*source.Credentials, error) {
	loc, err := source.ParseLocation(repo, "/")
	if err != nil || loc.IsLocal() {
		return &source.Credentials{Scope: "anonymous"}, nil
	}
	origin := loc.Origin()
	for _, g := range l.lent.Git {
		if source.OriginOf(g.URL) == origin {
			return l.secrets.Git(ctx, l.namespace, &g.SecretRef)
		}
	}
	return &source.Credentials{Scope: "anonymous"}, nil
}

// Registry is the keychain of found resources: for each registry host
// lent, the entry of its Secret for that host; anonymous elsewhere. The
// identity names the Secrets and their versions, for clients to share.
func (l *Lender) Registry(ctx context.Context) (authn.Keychain, string, error) {
	if len(l.lent.Registries) == 0 {
		return authn.NewMultiKeychain(), "anonymous", nil
	}
	kc := dockerConfig{}
	ids := []string{"lent:" + l.namespace}
	for _, r := range l.lent.Registries {
		sec, err := l.secrets.Get(ctx, l.namespace, &r.SecretRef)
		if err != nil {
			return nil, "", err
		}
		auths, err := readDockerConfig(l.namespace, r.SecretRef.Name, sec.Data)
		if err != nil {
			return nil, "", err
		}
		host := strings.ToLower(r.Host)
		entry, ok := auths.entry(host)
		if !ok {
			return nil, "", fmt.Errorf("Secret %s/%s has no auths entry for %s, the registry it is lent for", l.namespace, r.SecretRef.Name, host)
		}
		kc[host] = entry
		ids = append(ids, fmt.Sprintf("%s=%s@%s", host, r.SecretRef.Name, sec.ResourceVersion))
	}
	return kc, strings.Join(ids, ","), nil
}
