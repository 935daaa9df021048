package source

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"sluice.dev/sluice/internal/backoff"
	"sluice.dev/sluice/internal/egress"
)

// WithEgress makes every connection of the Cache's remotes obey p
// (a controller's, for the repositories its tenants name). A connection
// made under a context that carries a policy of its own (a render's, for
// a remote base) obeys that one.
func WithEgress(p *egress.Policy) Option { return func(c *Cache) { c.egress = p } }

// gitTransports installs, once per process, git's http and https
// transports through the policy of each connection's context: go-git
// holds one transport per scheme for the whole process.
var gitTransports sync.Once

func installGitTransports() {
	gitTransports.Do(func() {
		t := githttp.NewClient(&http.Client{Transport: backoff.Transport{Next: egress.ByContext{}}})
		client.InstallProtocol("https", t)
		client.InstallProtocol("http", t)
	})
}

// connect returns ctx for a connection to the remote, under the policy of
// ctx or else the Cache's. ssh and git:// connect outside net/http: their
// host is checked here, before they dial.
func (r *Repo) connect(ctx context.Context) (context.Context, error) {
	p := egress.FromContext(ctx)
	if p == nil {
		if p = r.egress; p == nil {
			return ctx, nil
		}
		ctx = egress.WithPolicy(ctx, p)
	}
	u, err := url.Parse(r.loc.URL)
	if err != nil {
		return nil, err
	}
	port := u.Port()
	switch u.Scheme {
	case "ssh":
		if port == "" {
			port = "22"
		}
	case "git":
		if port == "" {
			port = "9418"
		}
	default:
		return ctx, nil
	}
	if err := p.Check(ctx, u.Hostname(), port); err != nil {
		return nil, fmt.Errorf("%s: %w", r.loc, err)
	}
	return ctx, nil
}
