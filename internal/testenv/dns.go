package testenv

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a DNS server on loopback answering A and AAAA questions from a
// table, and a resolver that asks it: names that resolve where a test
// needs them to (a public-looking name to a link-local address), without
// touching the machine's own resolver.
type DNS struct {
	// Resolver asks this server, whatever the machine's configuration.
	Resolver *net.Resolver
	addr     string
}

// NewDNS serves names (without the trailing dot) → addresses.
func NewDNS(t TB, names map[string][]string) *DNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { pc.Close() })
	table := map[string][]netip.Addr{}
	for n, ips := range names {
		for _, ip := range ips {
			table[strings.ToLower(n)+"."] = append(table[strings.ToLower(n)+"."], netip.MustParseAddr(ip))
		}
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out, ok := answer(buf[:n], table); ok {
				pc.WriteTo(out, from)
			}
		}
	}()
	d := &DNS{addr: pc.LocalAddr().String()}
	d.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var dd net.Dialer
		return dd.DialContext(ctx, "udp", d.addr)
	}}
	return d
}

// answer builds the reply to one query.
func answer(msg []byte, table map[string][]netip.Addr) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.EnableCompression()
	ips, known := table[strings.ToLower(q.Name.String())]
	if !known {
		b = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: dnsmessage.RCodeNameError})
	}
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	for _, ip := range ips {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
		switch {
		case q.Type == dnsmessage.TypeA && ip.Is4():
			b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
		case q.Type == dnsmessage.TypeAAAA && ip.Is6():
			b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
