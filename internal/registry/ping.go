package registry

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// pingCache answers the registry "ping" (an unauthenticated GET /v2/,
// which go-containerregistry sends before its first call to each
// repository to learn how to authenticate) once per registry host: the
// answer does not depend on the repository, and a run that checks forty
// repositories of one registry then makes forty requests, not eighty.
type pingCache struct {
	next http.RoundTripper
	mu   sync.Mutex
	resp map[string]*cachedPing
}

type cachedPing struct {
	once   sync.Once
	status int
	header http.Header
	body   []byte
	err    error
}

func newPingCache(next http.RoundTripper) *pingCache {
	return &pingCache{next: next, resp: map[string]*cachedPing{}}
}

func (p *pingCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v2/" || req.Header.Get("Authorization") != "" {
		return p.next.RoundTrip(req)
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	p.mu.Lock()
	c, ok := p.resp[key]
	if !ok {
		c = &cachedPing{}
		p.resp[key] = c
	}
	p.mu.Unlock()
	c.once.Do(func() {
		resp, err := p.next.RoundTrip(req)
		if err != nil {
			c.err = err
			return
		}
		defer resp.Body.Close()
		c.status, c.header = resp.StatusCode, resp.Header.Clone()
		c.body, c.err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	})
	if c.err != nil || (c.status != http.StatusOK && c.status != http.StatusUnauthorized) {
		// A failed ping is not remembered: the next one tries again. Nor
		// is an answer other than the handshake's (200: no auth, 401: how
		// to authenticate): a 429 or a 5xx kept would answer every later
		// handshake with it, the registry long back.
		p.mu.Lock()
		if p.resp[key] == c {
			delete(p.resp, key)
		}
		p.mu.Unlock()
		if c.err != nil {
			return nil, c.err
		}
	}
	return &http.Response{
		Status: http.StatusText(c.status), StatusCode: c.status, Header: c.header.Clone(),
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
	}, nil
}
