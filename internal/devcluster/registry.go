package devcluster

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is an OCI registry on loopback, its content in memory: what
// `sluice dev registry` runs for a person to build images into and pin
// them from, as a team's registry would be used.
type Registry struct {
	// Host is the registry's host:port, as image references name it.
	Host string
	srv  *http.Server
}

// ServeRegistry starts a registry on addr, which must be a loopback
// address (127.0.0.1:0 for any free port): it takes pushes from anyone
// who can reach it.
func ServeRegistry(addr string) (*Registry, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("registry address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && !strings.EqualFold(host, "localhost") {
		return nil, fmt.Errorf("registry address %q: a loopback address (127.0.0.1:PORT): the registry takes any push", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting a registry: %w", err)
	}
	r := &Registry{Host: l.Addr().String(), srv: &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}}
	go func() {
		if err := r.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("registry: %v", err)
		}
	}()
	return r, nil
}

// Close stops the registry; what it held is gone.
func (r *Registry) Close() error { return r.srv.Close() }
