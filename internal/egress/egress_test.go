package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"sluice.dev/sluice/internal/testenv"
)

func TestWhatIsRefused(t *testing.T) {
	p, err := New([]string{"10.20.0.0/16", "192.168.7.7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		ip, want string
	}{
		{"127.0.0.1", "loopback"},
		{"127.9.9.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local"}, // 169.254.169.254 through NAT64
		{"10.0.0.1", "private"},
		{"172.16.3.4", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"100.64.1.1", "carrier-grade NAT"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"224.0.0.1", "multicast"},
		{"240.1.1.1", "reserved"},
		{"8.8.8.8", ""},
		{"2606:4700:4700::1111", ""},
		{"10.20.3.4", ""},   // an allowed CIDR
		{"192.168.7.7", ""}, // an allowed address
	} {
		got := p.refusedIP(netip.MustParseAddr(tt.ip))
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.ip, got, tt.want)
		}
	}
	for name, want := range map[string]string{
		"localhost": "loopback", "gitea": "without a domain", "registry.team.svc": ".svc",
		"web.team.svc.cluster.local": ".cluster.local", "printer.local": ".local", "metadata.google.internal": ".internal",
		"git.example.com": "",
	} {
		if got := refusedName(name); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestConnectionsAreCheckedAfterResolutionAndOnRedirects: names that
// resolve to refused addresses are refused before any connection; an
// allowed server's redirect to a refused address is refused; what the
// allow-list names is reached.
func TestConnectionsAreCheckedAfterResolutionAndOnRedirects(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "apiVersion: v1\nkind: Secret\nmetadata: {name: loot}\n")
	}))
	defer target.Close()
	_, targetPort, _ := net.SplitHostPort(target.Listener.Addr().String())
	dns := testenv.NewDNS(t, map[string][]string{
		"metadata.example.com": {"169.254.169.254"},
		"files.example.com":    {"127.0.0.1"},
		"mixed.example.com":    {"10.0.0.9", "127.0.0.1"},
	})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	defer redirector.Close()
	get := func(p *Policy, url string) error {
		resp, err := p.Client().Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	refused := func(err error, why string) bool {
		var re *RefusedError
		return errors.As(err, &re) && strings.Contains(re.Why, why) && strings.Contains(err.Error(), FlagAllow)
	}

	strict, _ := New(nil, WithResolver(dns.Resolver))
	if err := get(strict, fmt.Sprintf("http://metadata.example.com:%s/latest/meta-data/", targetPort)); !refused(err, "link-local") {
		t.Errorf("a name resolving to the metadata address: %v", err)
	}
	if err := get(strict, fmt.Sprintf("http://files.example.com:%s/x.yaml", targetPort)); !refused(err, "loopback") {
		t.Errorf("a name resolving to loopback: %v", err)
	}
	if err := get(strict, target.URL); !refused(err, "loopback") {
		t.Errorf("a loopback address: %v", err)
	}
	if err := get(strict, fmt.Sprintf("http://mixed.example.com:%s/", targetPort)); !refused(err, "") {
		t.Errorf("a name of private and loopback addresses: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the target was reached %d times", n)
	}

	// The redirector is allowed by host and port; where it sends is not.
	_, redirPort, _ := net.SplitHostPort(redirector.Listener.Addr().String())
	viaRedirect, _ := New([]string{"127.0.0.1:" + redirPort}, WithResolver(dns.Resolver))
	for _, to := range []string{target.URL + "/x.yaml", fmt.Sprintf("http://metadata.example.com:%s/", targetPort)} {
		if err := get(viaRedirect, redirector.URL+"/?to="+to); !refused(err, "") {
			t.Errorf("a redirect to %s: %v", to, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the target was reached %d times through redirects", n)
	}

	// What the operator names is reached: by address, by name, by domain.
	for _, allow := range []string{"127.0.0.1", "127.0.0.0/8", "files.example.com", "*.example.com"} {
		p, err := New([]string{allow}, WithResolver(dns.Resolver))
		if err != nil {
			t.Fatal(err)
		}
		if err := get(p, fmt.Sprintf("http://files.example.com:%s/x.yaml", targetPort)); err != nil {
			t.Errorf("allowed by %q: %v", allow, err)
		}
	}
	if hits.Load() != 4 {
		t.Errorf("the target was reached %d times, want 4", hits.Load())
	}

	// Through a context: a client shared by callers of different
	// policies (git's) obeys each request's.
	shared := &http.Client{Transport: ByContext{}}
	req, _ := http.NewRequestWithContext(WithPolicy(context.Background(), strict), http.MethodGet, target.URL, nil)
	if _, err := shared.Do(req); !refused(err, "loopback") {
		t.Errorf("through the context's policy: %v", err)
	}
	req, _ = http.NewRequest(http.MethodGet, target.URL, nil)
	if resp, err := shared.Do(req); err != nil {
		t.Errorf("without a policy: %v", err)
	} else {
		resp.Body.Close()
	}
}
