// Package egress decides which addresses Sluice connects to on behalf of
// what others wrote: a remote kustomize base or file a source names, and
// everything a controller reaches for the resources of the teams sharing
// it. Loopback, link-local (cloud metadata at 169.254.169.254), private
// and cluster-internal addresses are refused unless the operator's
// allow-list names them; the check is made on the address actually
// connected to, after DNS resolution, so a name that resolves (or
// re-resolves) to a refused address, and a redirect to one, are refused
// too.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Policy is where connections may go. A nil *Policy allows everything.
type Policy struct {
	hosts    map[string]bool // "host" and "host:port", lower case
	suffixes []string        // ".example.com", from "*.example.com"
	nets     []netip.Prefix
	flag     string
	dialer   *net.Dialer
	resolver *net.Resolver

	once      sync.Once
	transport *http.Transport
}

// FlagAllow is the flag that names what a Policy allows, named in errors.
const FlagAllow = "--allow-remote-hosts"

// Option configures a Policy.
type Option func(*Policy)

// WithResolver resolves names through r. The default is
// net.DefaultResolver.
func WithResolver(r *net.Resolver) Option { return func(p *Policy) { p.resolver = r } }

// New returns a Policy refusing special addresses except those allow
// names: a host name ("git.internal", any port), "host:port", a domain
// and its subdomains ("*.svc.cluster.local"), an IP address or a CIDR
// ("10.0.0.0/8").
func New(allow []string, opts ...Option) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}, flag: FlagAllow, resolver: net.DefaultResolver,
		dialer: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}
	for _, o := range opts {
		o(p)
	}
	for _, a := range allow {
		a = strings.ToLower(strings.TrimSpace(a))
		switch {
		case a == "":
		case strings.Contains(a, "/"):
			pfx, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, fmt.Errorf("%s %q: not a CIDR: %w", FlagAllow, a, err)
			}
			p.nets = append(p.nets, pfx.Masked())
		case strings.HasPrefix(a, "*."):
			p.suffixes = append(p.suffixes, a[1:])
		default:
			if ip, err := netip.ParseAddr(strings.Trim(a, "[]")); err == nil {
				p.nets = append(p.nets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				continue
			}
			p.hosts[a] = true
		}
	}
	return p, nil
}

// Allowing returns a copy of p that also allows these hosts ("host" or
// "host:port"): the hosts a person's own files name, say.
func (p *Policy) Allowing(hosts ...string) *Policy {
	if p == nil {
		return nil
	}
	c := &Policy{hosts: map[string]bool{}, suffixes: p.suffixes, nets: p.nets, flag: p.flag, dialer: p.dialer, resolver: p.resolver}
	for h := range p.hosts {
		c.hosts[h] = true
	}
	for _, h := range hosts {
		if h != "" {
			c.hosts[strings.ToLower(h)] = true
		}
	}
	return c
}

// RefusedError is a connection a Policy refused.
type RefusedError struct {
	// Host is the name dialed; Addr the address it resolved to, if any.
	Host, Addr string
	// Why says what the address is: "a link-local address".
	Why  string
	Flag string
}

func (e *RefusedError) Error() string {
	at := e.Host
	if e.Addr != "" && e.Addr != e.Host {
		at = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	return fmt.Sprintf("connecting to %s: %s: refused unless %s names it", at, e.Why, e.Flag)
}

// allowedName reports whether the allow-list names the host.
func (p *Policy) allowedName(host, port string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if p.hosts[host] || p.hosts[net.JoinHostPort(host, port)] {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) || host == s[1:] {
			return true
		}
	}
	return false
}

// refusedName says why a name is refused before it is resolved: names a
// cluster or a local network resolves ("web", "web.team.svc",
// "x.cluster.local", "printer.local", "host.internal").
func refusedName(host string) string {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return ""
	}
	switch {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return "a loopback name"
	case !strings.Contains(h, "."):
		return "a name without a domain, which resolves inside the cluster or the local network"
	}
	for _, s := range []string{".svc", ".cluster.local", ".local", ".internal", ".home.arpa"} {
		if strings.HasSuffix(h, s) {
			return "a cluster-internal or local name (" + s + ")"
		}
	}
	return ""
}

// special ranges no public service lives at, beyond what netip tells.
var special = []struct {
	pfx netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address, as pod and overlay networks use"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

// refusedIP says why an address is refused, "" when it is not.
func (p *Policy) refusedIP(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, n := range p.nets {
		if n.Contains(ip) {
			return ""
		}
	}
	// NAT64 (64:ff9b::/96) reaches the IPv4 address it embeds.
	if ip.Is6() && netip.MustParsePrefix("64:ff9b::/96").Contains(ip) {
		b := ip.As16()
		if why := p.refusedIP(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); why != "" {
			return why + " (through NAT64)"
		}
	}
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata services live there)"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, s := range special {
		if s.pfx.Contains(ip) {
			return s.why
		}
	}
	return ""
}

// Check resolves host and reports whether a connection to it on port
// would be refused: the check made before a connection that cannot be
// made through DialContext (ssh's), and by callers that want to fail
// before they start.
func (p *Policy) Check(ctx context.Context, host, port string) error {
	_, err := p.resolve(ctx, host, port)
	return err
}

// resolve returns the addresses of host that may be connected to; nil
// (dial by name) without a Policy.
func (p *Policy) resolve(ctx context.Context, host, port string) ([]netip.Addr, error) {
	if p == nil {
		return nil, nil
	}
	named := p.allowedName(host, port)
	if why := refusedName(host); why != "" && !named {
		return nil, &RefusedError{Host: host, Why: why, Flag: p.flag}
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = p.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, err
	}
	if named {
		return ips, nil // whatever it resolves to: the operator named it
	}
	var ok []netip.Addr
	var refused error
	for _, ip := range ips {
		if why := p.refusedIP(ip); why != "" {
			if refused == nil {
				refused = &RefusedError{Host: host, Addr: ip.String(), Why: why, Flag: p.flag}
			}
			continue
		}
		ok = append(ok, ip)
	}
	if len(ok) == 0 {
		if refused == nil {
			refused = fmt.Errorf("%s has no address", host)
		}
		return nil, refused
	}
	return ok, nil
}

// DialContext connects as net.Dialer does, to an address p allows: the
// name is resolved here and the very address checked is the one
// connected to, so that no second resolution can lead elsewhere.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if p != nil {
		d = p.dialer
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := p.resolve(ctx, host, port)
	if err != nil {
		return nil, err
	}
	if ips == nil {
		return d.DialContext(ctx, network, addr)
	}
	var last error
	for _, ip := range ips {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, last
}

// Guard returns a copy of base whose connections p checks.
func (p *Policy) Guard(base *http.Transport) *http.Transport {
	t := base.Clone()
	if p != nil {
		t.DialContext = p.DialContext
	}
	return t
}

// Transport is a copy of http.DefaultTransport guarded by p, made once.
func (p *Policy) Transport() *http.Transport {
	if p == nil {
		return http.DefaultTransport.(*http.Transport)
	}
	p.once.Do(func() { p.transport = p.Guard(http.DefaultTransport.(*http.Transport)) })
	return p.transport
}

// Client is an HTTP client guarded by p (redirects are connections too:
// each is checked).
func (p *Policy) Client() *http.Client {
	return &http.Client{Transport: p.Transport()}
}

type policyKey struct{}

// WithPolicy makes the connections made under ctx through this package
// (ContextTransport, DialContext) obey p.
func WithPolicy(ctx context.Context, p *Policy) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, policyKey{}, p)
}

// FromContext is the Policy of ctx, nil for none.
func FromContext(ctx context.Context) *Policy {
	p, _ := ctx.Value(policyKey{}).(*Policy)
	return p
}

// ByContext sends each request through the transport of the Policy of
// its context (http.DefaultTransport without one): for a client shared
// by callers of different policies (git's, which its library holds once
// per process). Connections are never shared between policies.
type ByContext struct{}

// RoundTrip implements http.RoundTripper.
func (ByContext) RoundTrip(req *http.Request) (*http.Response, error) {
	return FromContext(req.Context()).Transport().RoundTrip(req)
}
