package registry

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	orasremote "oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// ORASRepository is repo (host/path) as oras-go reaches it, for libraries
// built on oras-go (Notation's): through this Client's transport (its
// rate limit and egress guard), with its credentials, over plain HTTP
// where this Client would be.
func (c *Client) ORASRepository(repo string) (*orasremote.Repository, error) {
	r, err := c.ParseRepository(repo)
	if err != nil {
		return nil, err
	}
	o, err := orasremote.NewRepository(r.RegistryStr() + "/" + r.RepositoryStr())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", repo, err)
	}
	o.PlainHTTP = r.Scheme() == "http"
	o.Client = &auth.Client{
		Client: &http.Client{Transport: c.rt},
		Credential: func(ctx context.Context, host string) (auth.Credential, error) {
			reg, err := name.NewRegistry(host, c.nameOptions(host)...)
			if err != nil {
				return auth.EmptyCredential, err
			}
			a, err := c.keychain.Resolve(reg)
			if err != nil || a == authn.Anonymous {
				return auth.EmptyCredential, err
			}
			cfg, err := a.Authorization()
			if err != nil {
				return auth.EmptyCredential, err
			}
			return auth.Credential{Username: cfg.Username, Password: cfg.Password, RefreshToken: cfg.IdentityToken, AccessToken: cfg.RegistryToken}, nil
		},
		Cache: auth.NewCache(),
	}
	return o, nil
}
